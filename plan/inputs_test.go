package plan

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/nix/nixtest"
	"github.com/switchyard-nix/switchyard/plan/coordinates"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/plan/plantest"
)

// inputTree is a test tree of one node, web1, whose module is hosts/web1.nix.
func inputTree(t *testing.T) string {
	t.Helper()
	return plantest.WriteTree(t, filepath.Join(t.TempDir(), "tree"), plantest.Tree{
		Nodes: []plantest.Node{{Name: "web1", Host: "127.0.0.1", Port: 2222}},
	})
}

// evalModuleAttr is what the real Nix reads for attribute x of the module at path:
// proof that the input the test changes is one the evaluation depends on.
func evalModuleAttr(t *testing.T, module string) string {
	t.Helper()
	return runNix(t, "nix-instantiate", "--eval", "--strict", "--json", "--argstr", "m", module, "--expr", "{ m }: (import (/. + m) { }).x")
}

// Issue 11 item 10: an input of the node's evaluation that no path literal names still
// changes nixos_conf (and so misses no eval-cache entry and no redeploy). Each case is
// one way a module reaches a tree file; the real Nix shows the module reads it.
func TestNixosConfCoversEveryTreeInput(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	for _, tc := range []struct {
		name   string
		module string // hosts/web1.nix
		files  map[string]string
		change func(t *testing.T, tree string)
	}{
		{
			name:   "import of ./. + a string",
			module: `{ ... }: { x = import (./. + "/extra.nix"); }`,
			files:  map[string]string{"hosts/extra.nix": `"one"`},
			change: func(t *testing.T, tree string) { writeTestFile(t, filepath.Join(tree, "hosts", "extra.nix"), `"two"`) },
		},
		{
			name:   "a file added to a directory read by builtins.readDir",
			module: `{ ... }: { x = builtins.attrNames (builtins.readDir ../data); }`,
			files:  map[string]string{"data/a": "a"},
			change: func(t *testing.T, tree string) { writeTestFile(t, filepath.Join(tree, "data", "b"), "b") },
		},
		{
			name:   "import through a variable (path interpolation)",
			module: `{ ... }: let name = "extra"; in { x = import ./${name}.nix; }`,
			files:  map[string]string{"hosts/extra.nix": `"one"`},
			change: func(t *testing.T, tree string) { writeTestFile(t, filepath.Join(tree, "hosts", "extra.nix"), `"two"`) },
		},
		{
			name:   "import through a variable holding a string path",
			module: `{ ... }: let dir = dirOf (dirOf __curPos.file); in { x = import (dir + "/lib/extra.nix"); }`,
			files:  map[string]string{"lib/extra.nix": `"one"`},
			change: func(t *testing.T, tree string) { writeTestFile(t, filepath.Join(tree, "lib", "extra.nix"), `"two"`) },
		},
		{
			name:   "Nix code in a file not named .nix",
			module: `{ ... }: { x = import ./web1.conf; }`,
			files:  map[string]string{"hosts/web1.conf": `import ../lib/extra.nix`, "lib/extra.nix": `"one"`},
			change: func(t *testing.T, tree string) { writeTestFile(t, filepath.Join(tree, "lib", "extra.nix"), `"two"`) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tree := inputTree(t)
			module := filepath.Join(tree, "hosts", "web1.nix")
			writeTestFile(t, module, tc.module)
			for rel, content := range tc.files {
				writeTestFile(t, filepath.Join(tree, rel), content)
			}
			before, read := compute(t, tree, run{}).Nodes[0].NixosConf, evalModuleAttr(t, module)
			tc.change(t, tree)
			after, readAfter := compute(t, tree, run{}).Nodes[0].NixosConf, evalModuleAttr(t, module)
			if read == readAfter {
				t.Fatalf("the change is not an input: the module reads %s both times", read)
			}
			if before == after {
				t.Errorf("the module now reads %s (was %s) but nixos_conf is unchanged: the node would not be redeployed", readAfter, read)
			}
		})
	}
}

// Issue 11 item 10: nixpkgs is an input by its content, not by its path string: the
// same path with other content (a checkout moved to another commit) changes
// nixos_conf and the evaluated derivation; a symlink to nixpkgs moved to another store
// path does too. The stand-in nixpkgs has only nixos/lib/eval-config.nix.
func TestNixosConfCoversNixpkgsContent(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	tree := inputTree(t)
	nixpkgs := filepath.Join(t.TempDir(), "nixpkgs")
	writeTestFile(t, filepath.Join(nixpkgs, "version"), "1")
	writeTestFile(t, filepath.Join(nixpkgs, "nixos", "lib", "eval-config.nix"), `{ system, modules }: {
  config.system.build.toplevel = derivation {
    name = "stand-in-nixos-${builtins.readFile ../../version}";
    inherit system;
    builder = "/bin/sh";
    args = [ "-c" ": > $out" ];
  };
}
`)
	var def map[string]any
	defFile := filepath.Join(tree, "deployment.json")
	b, err := os.ReadFile(defFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &def); err != nil {
		t.Fatal(err)
	}
	def["system"], def["nixpkgs"] = "nixos", nixpkgs
	b, _ = json.Marshal(def)
	writeTestFile(t, defFile, string(b))

	p := compute(t, tree, run{})
	drv := instantiate(t, p)["web1"]
	writeTestFile(t, filepath.Join(nixpkgs, "version"), "2")
	p2 := compute(t, tree, run{})
	drv2 := instantiate(t, p2)["web1"]
	if drv == drv2 {
		t.Fatalf("the stand-in nixpkgs change is not an input: %s both times", drv)
	}
	if p.Nodes[0].NixosConf == p2.Nodes[0].NixosConf {
		t.Errorf("nixpkgs at %s changed (derivation %s, was %s) but nixos_conf is unchanged", nixpkgs, drv2, drv)
	}
	if strings.Contains(string(p2.Nodes[0].PlanJSON), nixpkgs) || strings.Contains(string(p2.Nodes[0].Configuration), nixpkgs) {
		t.Errorf("nixpkgs' path is in the node's files")
	}
}

// Issue 11 item 10: a tree module that reads the environment is refused before anything
// runs (exit 2), naming the file, the line and the variable: the node's evaluation
// runs without the caller's environment, so the read could only be wrong.
func TestTreeModuleGetEnvRefused(t *testing.T) {
	tree := inputTree(t)
	writeTestFile(t, filepath.Join(tree, "apps", "hello.nix"), "# builtins.getEnv in a comment is fine\n{ ... }:\n{\n  networking.domain = builtins.getEnv \"X\";\n}\n")
	_, err := tryCompute(t, tree, run{})
	if err == nil {
		t.Fatal("a module reading builtins.getEnv \"X\" planned")
	}
	if !field.IsRefusal(err) {
		t.Errorf("error %v is not a refusal (exit 2)", err)
	}
	for _, want := range []string{"apps/hello.nix", "line 4", `"X"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// Issue 11 item 10: a read of the environment no source scan sees (a name built at run
// time) reads nothing, and NIX_PATH is no search path: the node's evaluation runs with
// EvalEnv and EvalArgv, so nixos_conf need not cover the caller's environment.
func TestEvalWithoutEnvironment(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	tree := inputTree(t)
	writeTestFile(t, filepath.Join(tree, "builder.nix"), `{ configuration, plan }:
derivation {
  name = "env-" + builtins.${"get" + "Env"} "SWITCHYARD_TEST_INPUT" + "-"
    + (if builtins.tryEval (import <nixpkgs>) == { success = false; value = false; } then "nopath" else "path");
  system = builtins.currentSystem;
  builder = "/bin/sh";
  args = [ "-c" ": > $out" ];
}
`)
	nixpkgs := filepath.Join(t.TempDir(), "nixpkgs")
	writeTestFile(t, filepath.Join(nixpkgs, "default.nix"), "1")
	caller := map[string]string{"SWITCHYARD_TEST_INPUT": "leaked", "NIX_PATH": "nixpkgs=" + nixpkgs}
	p := compute(t, tree, run{})
	if err := p.Write(); err != nil {
		t.Fatal(err)
	}
	argv := p.Nodes[0].EvalArgv()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = EvalEnv(func(name string) (string, bool) { v, ok := caller[name]; return v, ok })
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if drv := strings.TrimSpace(string(out)); !strings.HasSuffix(drv, "-env--nopath.drv") {
		t.Errorf("the evaluation saw the caller's environment: %s", drv)
	}
	for _, v := range cmd.Env {
		if strings.HasPrefix(v, "SWITCHYARD_TEST_INPUT=") || strings.HasPrefix(v, "NIX_PATH=") {
			t.Errorf("EvalEnv keeps %s", v)
		}
	}
}

// nixpkgs kept in the tree reads the environment for impure use; it is not the
// operator's module and is not refused (evaluated without the environment, it takes its
// defaults).
func TestVendoredNixpkgsGetEnvNotRefused(t *testing.T) {
	tree := inputTree(t)
	writeTestFile(t, filepath.Join(tree, "nixpkgs", "pkgs", "top-level", "impure.nix"), `{ home = builtins.getEnv "HOME"; }`)
	defFile := filepath.Join(tree, "deployment.json")
	b, err := os.ReadFile(defFile)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(b, &def); err != nil {
		t.Fatal(err)
	}
	def["nixpkgs"] = map[string]any{"_repoPath": "nixpkgs"}
	b, _ = json.Marshal(def)
	writeTestFile(t, defFile, string(b))
	if _, err := tryCompute(t, tree, run{}); err != nil {
		t.Errorf("nixpkgs in the tree refused: %v", err)
	}
	writeTestFile(t, filepath.Join(tree, "lib", "impure.nix"), `{ home = builtins.getEnv "HOME"; }`)
	if _, err := tryCompute(t, tree, run{}); err == nil || !strings.Contains(err.Error(), "lib/impure.nix") {
		t.Errorf("a getEnv outside nixpkgs: %v", err)
	}
}

// A saved plan written into the tree (plan --out, then apply --plan) is switchyard's own
// output, no input: the apply that reads it computes the nixos_conf the plan saved.
func TestSavedPlanInTreeNoInput(t *testing.T) {
	tree := inputTree(t)
	saved := filepath.Join(tree, "saved-plan.json")
	planned := compute(t, tree, run{}).Nodes[0].NixosConf
	writeTestFile(t, saved, `{"nodes":{}}`)
	def := load(t, tree)
	m, _ := method.Lookup("ssh")
	d, err := merge.Merge(def, m, nil, merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compute(d, coordinates.Fixed(m.Coordinates, nil), Options{StateDir: filepath.Join(tree, ".switchyard"), Exclude: []string{saved, ""}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Nodes[0].NixosConf != planned {
		t.Error("the saved plan in the tree changed nixos_conf")
	}
	if compute(t, tree, run{}).Nodes[0].NixosConf == planned {
		t.Error("a file in the tree not excluded left nixos_conf unchanged")
	}
}
