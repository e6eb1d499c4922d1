package nixostests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

func nixTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SWITCHYARD_TESTBED") == "require" {
			t.Fatalf("%s not on PATH", name)
		}
		t.Skipf("%s not on PATH (run testbed/setup.sh)", name)
	}
	return p
}

func TestNixFilesParse(t *testing.T) {
	tool := nixTool(t, "nix-instantiate")
	root := testbed.RepoRoot()
	files := []string{filepath.Join(root, "flake.nix")}
	for _, f := range []string{"default.nix", "verdict.nix", "switch.nix", "owned.nix"} {
		files = append(files, filepath.Join(root, "testbed", "closures", f))
	}
	for _, dir := range []string{"nixos-tests", "nix", filepath.Join("examples", "tree-nixos")} {
		more, _ := filepath.Glob(filepath.Join(root, dir, "*.nix"))
		files = append(files, more...)
	}
	for _, f := range files {
		if out, err := exec.Command(tool, "--parse", f).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", f, err, out)
		}
	}
}

// TestFlakeLockMatchesInputs checks flake.lock is a version 7 lock whose root inputs are
// exactly flake.nix's inputs, each locked and recorded with the reference flake.nix names.
func TestFlakeLockMatchesInputs(t *testing.T) {
	tool := nixTool(t, "nix-instantiate")
	root := testbed.RepoRoot()
	// flake.nix's inputs are plain data: evaluate just them, never the outputs.
	out, err := exec.Command(tool, "--eval", "--strict", "--json", "-E",
		"(import "+filepath.Join(root, "flake.nix")+").inputs").Output()
	if err != nil {
		t.Fatalf("evaluate flake.nix inputs: %v", err)
	}
	var inputs map[string]struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(out, &inputs); err != nil {
		t.Fatalf("flake.nix inputs: %v", err)
	}

	raw, err := os.ReadFile(filepath.Join(root, "flake.lock"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Version int    `json:"version"`
		Root    string `json:"root"`
		Nodes   map[string]struct {
			Inputs   map[string]string `json:"inputs"`
			Locked   map[string]any    `json:"locked"`
			Original map[string]any    `json:"original"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		t.Fatalf("flake.lock is not JSON: %v", err)
	}
	if lock.Version != 7 {
		t.Errorf("flake.lock version %d, want 7", lock.Version)
	}
	rootNode, ok := lock.Nodes[lock.Root]
	if !ok {
		t.Fatalf("flake.lock root node %q missing", lock.Root)
	}
	if got, want := keys(rootNode.Inputs), keys(inputs); !equal(got, want) {
		t.Fatalf("flake.lock root inputs %v, flake.nix inputs %v", got, want)
	}
	for name, in := range inputs {
		node, ok := lock.Nodes[rootNode.Inputs[name]]
		if !ok {
			t.Errorf("input %s: lock node %q missing", name, rootNode.Inputs[name])
			continue
		}
		for _, k := range []string{"type", "narHash"} {
			if node.Locked[k] == nil {
				t.Errorf("input %s: locked.%s missing", name, k)
			}
		}
		if got := originalURL(node.Original); got != in.URL {
			t.Errorf("input %s: lock original %q, flake.nix url %q", name, got, in.URL)
		}
	}
}

// originalURL renders a lock's "original" attribute set as a flake reference.
func originalURL(o map[string]any) string {
	s := func(k string) string { v, _ := o[k].(string); return v }
	switch s("type") {
	case "github", "gitlab", "sourcehut":
		u := s("type") + ":" + s("owner") + "/" + s("repo")
		if r := s("ref"); r != "" {
			u += "/" + r
		}
		return u
	default:
		return s("url")
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestFlakePackageUsesGo126 evaluates flake.nix's package and checks against a stub
// nixpkgs that has buildGo126Module and no buildGoModule: the package must be built with
// the Go 1.26 builder (go.mod needs 1.26 and buildGoModule runs with GOTOOLCHAIN=local),
// carry a vendorHash (not null: the module has third-party dependencies and no vendor/),
// run its own check phase over every package, and checks must hold module-eval.
func TestFlakePackageUsesGo126(t *testing.T) {
	tool := nixTool(t, "nix-instantiate")
	root := testbed.RepoRoot()
	expr := `
let
  flake = import ` + root + `/flake.nix;
  genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  lib = {
    inherit genAttrs;
    optionalString = c: s: if c then s else "";
    fileset = { toSource = a: { root = toString a.root; files = map toString a.fileset; }; unions = l: l; };
  };
  stubPkgs = system: {
    inherit lib system;
    buildGo126Module = a: { builder = "buildGo126Module"; inherit (a) vendorHash subPackages checkPhase src; };
    testers.runNixOSTest = m: m;
  };
  nixpkgs = { inherit lib; legacyPackages = genAttrs [ "x86_64-linux" "aarch64-linux" ] stubPkgs; };
  outputs = flake.outputs { self = outputs // { outPath = ` + root + `; }; inherit nixpkgs; };
in
builtins.mapAttrs (system: p: p.default // { checks = builtins.attrNames outputs.checks.${system}; }) outputs.packages
`
	out, err := exec.Command(tool, "--eval", "--strict", "--json", "-E", expr).CombinedOutput()
	if err != nil {
		t.Fatalf("evaluate flake.nix's packages with a stub nixpkgs: %v\n%s", err, out)
	}
	var pkgs map[string]struct {
		Builder     string   `json:"builder"`
		VendorHash  *string  `json:"vendorHash"`
		SubPackages []string `json:"subPackages"`
		CheckPhase  string   `json:"checkPhase"`
		Checks      []string `json:"checks"`
		Src         struct {
			Root  string   `json:"root"`
			Files []string `json:"files"`
		} `json:"src"`
	}
	if err := json.Unmarshal(out, &pkgs); err != nil {
		t.Fatalf("flake.nix packages: %v: %s", err, out)
	}
	if len(pkgs) == 0 {
		t.Fatal("flake.nix has no packages")
	}
	for system, p := range pkgs {
		if p.Builder != "buildGo126Module" {
			t.Errorf("%s: built with %q, want buildGo126Module", system, p.Builder)
		}
		if p.VendorHash == nil || !strings.HasPrefix(*p.VendorHash, "sha256-") {
			t.Errorf("%s: vendorHash %v, want an SRI sha256 (the module has dependencies and no vendor/)", system, p.VendorHash)
		}
		if !strings.Contains(p.CheckPhase, "go test") || !strings.Contains(p.CheckPhase, "./...") {
			t.Errorf("%s: check phase %q does not test every package", system, p.CheckPhase)
		}
		if p.Src.Root != root || len(p.Src.Files) < 10 || slices.Contains(p.Src.Files, filepath.Join(root, "flake.nix")) ||
			!slices.Contains(p.Src.Files, filepath.Join(root, "go.mod")) {
			t.Errorf("%s: src %+v, want a fileset of nix/src.nix's entries under %s", system, p.Src, root)
		}
		if !slices.Contains(p.Checks, "module-eval") || !slices.Contains(p.Checks, "module-eval-vm") || !slices.Contains(p.Checks, "switchyard") {
			t.Errorf("%s: checks %v lack module-eval, module-eval-vm or the package", system, p.Checks)
		}
	}
}
