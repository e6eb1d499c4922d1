package nixostests

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// The NixOS VM tests (SPEC 8) and the test-bed tier assert the same scenarios, each
// under one stable name. A VM test asserts a scenario in a `with subtest("<name>"):`
// block of its testScript. The test-bed tier's scenarios are found by parsing its test
// sources (go/parser), so none can be added unnoticed:
//
//   - every Test function of testbed/*_test.go named TestScenario*, and
//   - every Test function of cmd/switchyard/*_test.go whose doc comment cites a SPEC 9
//     acceptance scenario ("SPEC 9.4", "SPEC 6.2/9.11").
//
// A function that runs subtests with literal names (t.Run("stalled", ...)) counts as
// one scenario per subtest, keyed "<Func>/<subtest>". Each key must be in
// testbedScenarios, which names its VM counterparts; each of those names must be a
// subtest of a VM test. So a new test-bed scenario fails TestEveryTestbedScenarioHasVMCounterpart
// until it is mapped to a VM subtest that exists, and a VM subtest that is renamed or
// removed fails it too. The other way round, every VM subtest must be the counterpart
// of some test-bed test (TESTBED.md: every scenario the VM tests assert is also covered
// by the container tests), or be listed in vmOnly with the reason it has none.

// testbedScenarios maps a test-bed test ("<dir>.<Func>" or "<dir>.<Func>/<subtest>", dir
// relative to the repository) to the VM subtests that assert the same scenario. Keys
// beyond the required ones are allowed for other test-bed tests a VM subtest mirrors;
// every key must name a test that exists.
var testbedScenarios = map[string][]string{
	// testbed/scenarios_test.go: what each test closure leaves on a node.
	"testbed.TestScenarioHealthy":                   {"healthy"},
	"testbed.TestScenarioFailedUnit":                {"failed-unit"},
	"testbed.TestScenarioRestartLoop":               {"restart-loop"},
	"testbed.TestScenarioConditionSkipped":          {"condition-skipped"},
	"testbed.TestScenarioNeverActivates":            {"never-activates"},
	"testbed.TestScenarioSecretChain":               {"secret-chain"},
	"testbed.TestScenarioForeignPermanentMAC":       {"foreign-mac"},
	"testbed.TestScenarioSpawnFault":                {"spawn-fault"},
	"testbed.TestScenarioChainVariants/broken head": {"secret-chain-broken"},
	"testbed.TestScenarioChainVariants/stalled":     {"secret-chain-stalled"},

	// cmd/switchyard: the SPEC 9 acceptance scenarios.
	"cmd/switchyard.TestDeployFailedUnit":                       {"failed-unit", "failed-unit-tolerated"}, // 9.1
	"cmd/switchyard.TestDeploySpawnFault":                       {"spawn-fault"},                          // 9.2
	"cmd/switchyard.TestDeployRestartLoop":                      {"restart-loop", "restart-loop-over-budget"},
	"cmd/switchyard.TestVerdictOnlyChainConverges":              {"secret-chain"}, // 9.4
	"cmd/switchyard.TestVerdictOnlyChainStopsEarly/failed head": {"secret-chain-broken"},
	"cmd/switchyard.TestVerdictOnlyChainStopsEarly/stalled":     {"secret-chain-stalled"},
	"cmd/switchyard.TestDeploySetAside":                         {"set-aside"},         // 9.5
	"cmd/switchyard.TestDeployConditionSkipped":                 {"condition-skipped"}, // 9.6
	"cmd/switchyard.TestDeployNeverConfirmed":                   {"never-activates"},   // 9.7
	"cmd/switchyard.TestDeployUnreachable":                      {"unreachable"},       // 9.8
	"cmd/switchyard.TestSSHApplyOtherNodesGoOn":                 {"unreachable"},
	"cmd/switchyard.TestDeploySeveredBus":                       {"severed-bus"}, // 9.9
	"cmd/switchyard.TestDeployPermanentMACGate":                 {"foreign-mac"}, // 9.10
	"cmd/switchyard.TestSSHPlanThenApply":                       {"plan-then-apply"},
	"cmd/switchyard.TestSSHPlanCredentialsAndRefusals":          {"credential-paths", "submission-refused"}, // 9.11
	"cmd/switchyard.TestSSHApplyThenNothingChanged":             {"nixos-apply", "nothing-changed"},         // 9.12

	// Further test-bed tests that VM subtests mirror.
	"cmd/switchyard.TestDeployProxyJump": {"ssh-config"},
	"cmd/switchyard.TestDeploySudoUser":  {"sudo-user"},
}

// vmOnly are VM subtests with no test-bed counterpart, and why.
var vmOnly = map[string]string{
	"escaped-unit-names": "unit names with systemd's escapes come from NixOS's own unit generation (a mount of /srv/data-set); " +
		"the test closures have no such unit yet",
	"template-instances": "template instances owned through their template: verdict.TestClassify in the unit tier; " +
		"the test closures define no template yet",
	"cache-not-a-source-of-truth": "plan/evalcache.TestNeverASourceOfTruth and TestUnwritableDirectory in the unit tier",
}

// specVMTests are the VM tests SPEC 8 names.
var specVMTests = []string{
	"deployment-verdict-failed", "deployment-verdict-loop", "deployment-verdict-spawn", "deployment-verdict-chain",
	"deployment-unit-parsers", "deployment-ssh-hosts", "deployment-nixos-hosts", "deployment-eval-cache",
}

var (
	subtestRE  = regexp.MustCompile(`with subtest\("([^"]*)"\)`)
	scenarioRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)
	// A doc comment citing a SPEC 9 scenario: "SPEC 9.1:", "SPEC 6.2/9.11:".
	spec9RE = regexp.MustCompile(`SPEC ([0-9]+(\.[0-9]+)*[/, ]+)*9\.[0-9]+`)
)

// goTest is a Test function of the test-bed tier.
type goTest struct {
	key      string   // "<dir>.<Func>"
	doc      string   // its doc comment
	subtests []string // the literal names of its t.Run calls
}

// testbedTests parses the Test functions of dir's _test.go files (dir relative to the
// repository).
func testbedTests(t *testing.T, dir string) []goTest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testbed.RepoRoot(), dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files in %s: %v", dir, err)
	}
	var out []goTest
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", file, err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			gt := goTest{key: dir + "." + fn.Name.Name}
			if fn.Doc != nil {
				gt.doc = fn.Doc.Text()
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Run" {
					if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if name, err := strconv.Unquote(lit.Value); err == nil {
							gt.subtests = append(gt.subtests, name)
						}
					}
				}
				return true
			})
			out = append(out, gt)
		}
	}
	return out
}

// keys are a test's scenario keys: one per literal subtest, else the function itself.
func (g goTest) keys() []string {
	if len(g.subtests) == 0 {
		return []string{g.key}
	}
	var out []string
	for _, s := range g.subtests {
		out = append(out, g.key+"/"+s)
	}
	return out
}

// vmSubtests reads the subtest names of every nixos-tests/deployment-*.nix, by file
// (the VM test's name).
func vmSubtests(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testbed.RepoRoot(), "nixos-tests", "deployment-*.nix"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(file), ".nix")
		out[name] = []string{}
		for _, m := range subtestRE.FindAllStringSubmatch(string(b), -1) {
			out[name] = append(out[name], m[1])
		}
	}
	return out
}

func TestEveryTestbedScenarioHasVMCounterpart(t *testing.T) {
	existing := map[string]bool{} // every test and subtest key of the tier
	var required []string
	for _, g := range testbedTests(t, "testbed") {
		existing[g.key] = true
		for _, k := range g.keys() {
			existing[k] = true
			if strings.HasPrefix(g.key, "testbed.TestScenario") {
				required = append(required, k)
			}
		}
	}
	for _, g := range testbedTests(t, "cmd/switchyard") {
		existing[g.key] = true
		for _, k := range g.keys() {
			existing[k] = true
			if spec9RE.MatchString(g.doc) {
				required = append(required, k)
			}
		}
	}
	if len(required) < 20 {
		t.Fatalf("found only %d test-bed scenarios (%v): is the parsing still right?", len(required), required)
	}

	// Where each VM subtest is.
	where := map[string]string{}
	for file, subs := range vmSubtests(t) {
		if len(subs) == 0 {
			t.Errorf("%s.nix has no `with subtest(\"<scenario>\"):` block", file)
		}
		for _, s := range subs {
			if !scenarioRE.MatchString(s) {
				t.Errorf("%s.nix: subtest %q is not a scenario name (lower-case words joined by -)", file, s)
			}
			if other, dup := where[s]; dup {
				t.Errorf("subtest %q is in both %s.nix and %s.nix: a scenario lives in one VM test", s, other, file)
			}
			where[s] = file
		}
	}

	for _, k := range required {
		if _, ok := testbedScenarios[k]; !ok {
			t.Errorf("test-bed scenario %s has no VM counterpart: add a `with subtest(...)` block to a "+
				"nixos-tests/deployment-*.nix and map it in testbedScenarios", k)
		}
	}
	mapped := map[string]bool{}
	for k, subs := range testbedScenarios {
		if !existing[k] {
			t.Errorf("testbedScenarios names %s, which is no test (or subtest) of the test-bed tier", k)
		}
		if len(subs) == 0 {
			t.Errorf("testbedScenarios[%s] names no VM subtest", k)
		}
		for _, s := range subs {
			mapped[s] = true
			if where[s] == "" {
				t.Errorf("%s: no VM test has `with subtest(%q):`", k, s)
			}
		}
	}
	for s, why := range vmOnly {
		if mapped[s] {
			t.Errorf("vmOnly lists %q, which testbedScenarios maps (%s): drop it from vmOnly", s, why)
		}
		if where[s] == "" {
			t.Errorf("vmOnly lists %q, which no VM test has", s)
		}
	}
	for s, file := range where {
		if !mapped[s] && vmOnly[s] == "" {
			t.Errorf("%s.nix: subtest %q is no test-bed scenario's counterpart: map it in testbedScenarios, "+
				"or list it in vmOnly with the reason", file, s)
		}
	}
}

// stubArgs are `pkgs` and `self` for evaluating nixos-tests/default.nix without nixpkgs:
// runNixOSTest hands back the test module, so each test's own `name` can be read.
const stubArgs = `{ pkgs = { testers.runNixOSTest = m: m; }; self = { }; }`

func TestVMTestsAreSpecs(t *testing.T) {
	tool := nixTool(t, "nix-instantiate")
	root := testbed.RepoRoot()

	var files []string
	for name := range vmSubtests(t) {
		files = append(files, name)
	}
	sort.Strings(files)
	want := append([]string(nil), specVMTests...)
	sort.Strings(want)
	if !equal(files, want) {
		t.Errorf("nixos-tests/deployment-*.nix are %v; SPEC 8 names %v", files, want)
	}
	// The same names in SPEC 8 itself, where shared/ is beside the repository.
	if spec, err := os.ReadFile(filepath.Join(root, "..", "shared", "SPEC.md")); err == nil {
		s := string(spec)
		if i, j := strings.Index(s, "\n## 8."), strings.Index(s, "\n## 9."); i >= 0 && j > i {
			names := map[string]bool{}
			for _, m := range regexp.MustCompile("`(deployment-[a-z-]+)`").FindAllStringSubmatch(s[i:j], -1) {
				names[m[1]] = true
			}
			if got := keys(names); !equal(got, want) {
				t.Errorf("SPEC 8 now names %v; specVMTests has %v", got, want)
			}
		}
	}

	// default.nix lists each file under its name, and each test is called that.
	out, err := exec.Command(tool, "--eval", "--strict", "--json", "-E",
		fmt.Sprintf("builtins.mapAttrs (_: test: test.name) (import %s %s)", filepath.Join(root, "nixos-tests"), stubArgs)).CombinedOutput()
	if err != nil {
		t.Fatalf("evaluate nixos-tests/default.nix: %v\n%s", err, out)
	}
	var named map[string]string
	if err := json.Unmarshal(out, &named); err != nil {
		t.Fatalf("nixos-tests/default.nix: %v: %s", err, out)
	}
	if got := keys(named); !equal(got, want) {
		t.Errorf("nixos-tests/default.nix has %v, want %v", got, want)
	}
	for attr, name := range named {
		if attr != name {
			t.Errorf("nixos-tests/default.nix: %s is the test named %q", attr, name)
		}
	}
	b, _ := os.ReadFile(filepath.Join(root, "nixos-tests", "default.nix"))
	for _, name := range want {
		if !strings.Contains(string(b), "./"+name+".nix") {
			t.Errorf("nixos-tests/default.nix does not import ./%s.nix", name)
		}
	}
}

// TestFlakeChecksListVMTests evaluates flake.nix's outputs with a stub nixpkgs (just
// what building the `checks` attribute names needs) and checks that every system's
// checks hold the VM tests, as nixos-tests/default.nix gives them.
func TestFlakeChecksListVMTests(t *testing.T) {
	tool := nixTool(t, "nix-instantiate")
	root := testbed.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "flake.nix"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`import\s+\./nixos-tests\s*\{\s*inherit\s+(pkgs\s+self|self\s+pkgs)\s*;\s*\}`).Match(b) {
		t.Errorf("flake.nix does not add `import ./nixos-tests { inherit pkgs self; }` to its checks")
	}
	expr := fmt.Sprintf(`
let
  flake = import %[1]s/flake.nix;
  genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  lib = {
    inherit genAttrs;
    optionalString = c: s: if c then s else "";
    optionalAttrs = c: a: if c then a else { };
    mapAttrs = builtins.mapAttrs;
    attrNames = builtins.attrNames;
  };
  stubPkgs = system: { inherit lib system; testers.runNixOSTest = m: m; };
  nixpkgs = { inherit lib; legacyPackages = genAttrs [ "x86_64-linux" "aarch64-linux" "x86_64-darwin" "aarch64-darwin" ] stubPkgs; };
  outputs = flake.outputs { self = outputs // { outPath = %[1]s; }; inherit nixpkgs; };
in
builtins.mapAttrs (_: checks: builtins.filter (n: builtins.substring 0 11 n == "deployment-") (builtins.attrNames checks)) outputs.checks
`, root)
	out, err := exec.Command(tool, "--eval", "--strict", "--json", "-E", expr).CombinedOutput()
	if err != nil {
		t.Fatalf("evaluate flake.nix's checks with a stub nixpkgs: %v\n%s", err, out)
	}
	var checks map[string][]string
	if err := json.Unmarshal(out, &checks); err != nil {
		t.Fatalf("flake.nix checks: %v: %s", err, out)
	}
	want := append([]string(nil), specVMTests...)
	sort.Strings(want)
	if len(checks) == 0 {
		t.Fatalf("flake.nix has no checks")
	}
	for system, names := range checks {
		sort.Strings(names)
		if !equal(names, want) {
			t.Errorf("flake.nix checks.%s has the VM tests %v, want %v", system, names, want)
		}
	}
}

// renderExpr evaluates every VM test against a stub nixpkgs (fake is a directory
// standing in for its source: an eval-config.nix that only parses the module files it
// is given, nixos-test-base.nix, ssh-keys.nix) and a stub `lib` with the functions the
// tests use outside NixOS modules. It gives, per test, the testScript as rendered, the
// deployer's additionalPaths and the node names. NixOS modules themselves are not
// evaluated: that needs nixpkgs.
const renderExpr = `
{ repo, fake }:
let
  lib = rec {
    mapAttrs = builtins.mapAttrs;
    attrValues = builtins.attrValues;
    listToAttrs = builtins.listToAttrs;
    nameValuePair = name: value: { inherit name value; };
    concatStrings = builtins.concatStringsSep "";
    concatMapStrings = f: l: concatStrings (map f l);
    mapAttrsToList = f: a: map (n: f n a.${n}) (builtins.attrNames a);
    strings.escapeNixString = s: builtins.replaceStrings [ "$" ] [ "\\$" ] (builtins.toJSON s);
    mkDefault = x: x;
    mkForce = x: x;
  };
  pkgs = {
    inherit lib;
    path = /. + fake;
    stdenv.hostPlatform.system = "x86_64-linux";
    testers.runNixOSTest = m: m;
    writeText = name: text: builtins.toFile name text;
    runCommand = name: env: script: builtins.toFile name script;
  };
  self = {
    packages.x86_64-linux.default = "/nix/store/00000000000000000000000000000000-switchyard";
    nixosModules.switchyard = /. + repo + "/nix/module.nix";
  };
  node = n: {
    system.build.networkConfig = {
      networking.hostName = lib.mkDefault n;
      networking.extraHosts = "192.168.1.1 deployer\n192.168.1.2 ${n}\n";
    };
  };
  # A node module with stub arguments, its imports followed: its additionalPaths. Its
  # imports are read without the nodes argument: NixOS resolves imports before module
  # arguments such as nodes, so imports that use it recurse forever.
  paths = m0:
    let
      m = if builtins.isFunction m0 || builtins.isAttrs m0 then m0 else import m0;
      call = args: if builtins.isFunction m then m ({ inherit lib pkgs; config = { }; } // args) else m;
      v = call { inherit nodes; };
      imports = (call { nodes = throw "a node module's imports use the nodes argument (infinite recursion in NixOS)"; }).imports or [ ];
    in
    ((v.virtualisation or { }).additionalPaths or [ ]) ++ builtins.concatLists (map paths imports);
  tests = import (/. + repo + "/nixos-tests") { inherit pkgs self; };
  nodes = builtins.mapAttrs (n: _: node n) (builtins.foldl' (a: t: a // t.nodes) { } (builtins.attrValues tests));
in
builtins.mapAttrs
  (_: test: {
    script = test.testScript { inherit nodes; };
    paths = builtins.deepSeq (builtins.mapAttrs (_: paths) test.nodes) (paths test.nodes.deployer);
    nodes = builtins.attrNames test.nodes;
  })
  tests
`

// TestVMTestsRender renders every VM test against a stub nixpkgs, so mistakes in their
// Nix outside the NixOS modules show here rather than only on a machine with KVM: each
// testScript renders, names only machines the test defines, and holds its subtests; the
// operator trees the tests write for the deployer parse.
func TestVMTestsRender(t *testing.T) {
	tool := nixTool(t, "nix-instantiate")
	root := testbed.RepoRoot()
	fake := t.TempDir()
	for path, text := range map[string]string{
		"nixos/lib/eval-config.nix": `{ system, modules }:
let files = builtins.filter (m: builtins.isString m || builtins.isPath m) modules;
in builtins.seq (builtins.length (map import files)) {
  config.system.build.toplevel = "/nix/store/" + builtins.substring 0 32
    (builtins.hashString "sha256" (builtins.toJSON (map toString files) + toString (builtins.length modules))) + "-nixos-system";
}
`,
		"nixos/lib/testing/nixos-test-base.nix":          "{ ... }: { }\n",
		"nixos/modules/virtualisation/qemu-vm.nix":       "{ ... }: { }\n",
		"nixos/modules/testing/test-instrumentation.nix": "{ ... }: { }\n",
		"nixos/tests/ssh-keys.nix": `pkgs: {
  snakeOilPrivateKey = pkgs.writeText "privkey.snakeoil" "not a key";
  snakeOilPublicKey = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTY snakeoil";
}
`,
	} {
		p := filepath.Join(fake, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Read-write: builtins.toFile and builtins.path add the rendered files to the store.
	cmd := exec.Command(tool, "--read-write-mode", "--eval", "--strict", "--json",
		"--argstr", "repo", root, "--argstr", "fake", fake, "-E", renderExpr)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("render the VM tests with a stub nixpkgs: %v\n%s", err, stderr)
	}
	var rendered map[string]struct {
		Script string   `json:"script"`
		Paths  []string `json:"paths"`
		Nodes  []string `json:"nodes"`
	}
	if err := json.Unmarshal(out, &rendered); err != nil {
		t.Fatal(err)
	}
	subtests := vmSubtests(t)
	machineCall := regexp.MustCompile(`\b([a-z][a-z0-9_]*)\.(succeed|fail|execute|wait_for_unit|wait_until_succeeds|wait_for_open_port|sleep|start|shutdown|crash)\(`)
	treeFile := regexp.MustCompile(`cp (/nix/store/\S+) "\$out/([^"]+)"`)
	for name, r := range rendered {
		if !strings.Contains(r.Script, "start_all()") {
			t.Errorf("%s: the testScript starts no machine", name)
		}
		if strings.Contains(r.Script, "${") {
			t.Errorf("%s: the rendered testScript still holds ${: an antiquotation escaped by mistake", name)
		}
		for _, s := range subtests[name] {
			if !strings.Contains(r.Script, fmt.Sprintf("with subtest(%q):", s)) {
				t.Errorf("%s: subtest %q is not in the rendered testScript", name, s)
			}
		}
		nodes := map[string]bool{}
		for _, n := range r.Nodes {
			nodes[n] = true
		}
		for _, m := range machineCall.FindAllStringSubmatch(r.Script, -1) {
			// `machine` is the helpers' parameter (common.nix), `time` the module.
			if !nodes[m[1]] && m[1] != "machine" && m[1] != "time" {
				t.Errorf("%s: the testScript calls %s.%s, but the test has no machine %s (nodes %v)", name, m[1], m[2], m[1], r.Nodes)
			}
		}
		if len(r.Paths) == 0 {
			t.Errorf("%s: the deployer holds no system to deploy", name)
		}
		for _, p := range r.Paths {
			if !strings.HasSuffix(p, "-switchyard-test-tree") {
				continue
			}
			script, err := os.ReadFile(p) // the stub runCommand keeps the build script
			if err != nil {
				t.Fatal(err)
			}
			files := treeFile.FindAllStringSubmatch(string(script), -1)
			if len(files) == 0 {
				t.Errorf("%s: the operator tree has no files", name)
			}
			for _, f := range files {
				if out, err := exec.Command(tool, "--parse", f[1]).CombinedOutput(); err != nil {
					t.Errorf("%s: the tree's %s does not parse: %v\n%s", name, f[2], err, out)
				}
			}
		}
	}
}
