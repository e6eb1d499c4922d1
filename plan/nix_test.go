package plan

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/nix/nixtest"
	"github.com/switchyard-nix/switchyard/plan/plantest"
)

func runNix(t testing.TB, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv[:min(len(argv), 4)], " "), err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// instantiate writes the plan's files and evaluates each node's toplevel to a .drv.
func instantiate(t testing.TB, p *Plan) map[string]string {
	t.Helper()
	if err := p.Write(); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range p.Nodes {
		drv := runNix(t, n.EvalArgv()...)
		if !strings.HasPrefix(drv, "/nix/store/") || !strings.HasSuffix(drv, ".drv") || strings.Contains(drv, "\n") {
			t.Fatalf("%s: nix-instantiate printed %q, want one .drv", n.Name, drv)
		}
		out[n.Name] = drv
	}
	return out
}

// A test tree's node evaluates to a .drv that realises to a toplevel shaped like the test
// bed's closures; a module change makes a new toplevel.
func TestBuildTestTree(t *testing.T) {
	nixtest.Require(t, "nix-instantiate", "nix-store")
	tree := plantest.WriteTree(t, filepath.Join(t.TempDir(), "tree"), plantest.Tree{
		Nodes: []plantest.Node{{Name: "web1", Host: "127.0.0.1", Port: 2222}, {Name: "web2", Host: "127.0.0.1", Port: 2223}},
	})
	p := compute(t, tree, run{})
	drvs := instantiate(t, p)
	if drvs["web1"] == drvs["web2"] {
		t.Error("two nodes, one toplevel")
	}
	out := runNix(t, "nix-store", "--realise", drvs["web1"])
	for _, f := range []string{"bin/switch-to-configuration", "etc/systemd/system/hello.service", "nixos-version"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("toplevel %s: %v", out, err)
		}
	}
	if !strings.Contains(out, "nixos-system-healthy-") {
		t.Errorf("toplevel %s is not the healthy closure", out)
	}

	// Evaluating again gives the same derivation.
	if again := instantiate(t, compute(t, tree, run{})); again["web1"] != drvs["web1"] {
		t.Errorf("evaluation is not stable: %s then %s", drvs["web1"], again["web1"])
	}
	// A module change: a new toplevel for that node only; a new nixos_conf for every
	// node (any tree file is every node's input), so web2 evaluates again to the same.
	writeTestFile(t, filepath.Join(tree, "hosts", "web1.nix"), "{ ... }: { networking.hostName = \"web-one\"; }\n")
	p2 := compute(t, tree, run{})
	changed := instantiate(t, p2)
	if changed["web1"] == drvs["web1"] || node(t, p2, "web1").NixosConf == node(t, p, "web1").NixosConf {
		t.Error("changing web1's module did not change its toplevel and nixos_conf")
	}
	if changed["web2"] != drvs["web2"] || node(t, p2, "web2").NixosConf == node(t, p, "web2").NixosConf {
		t.Error("changing web1's module changed web2's toplevel, or left its nixos_conf")
	}
	// A DEPLOYMENT picking another closure.
	failed := instantiate(t, compute(t, tree, run{deployment: `{"deployment-method":{"ssh":{"applications":{"hello":{"enable":true,"settings":{"closure":"failed-unit"}}}}}}`}))
	if !strings.Contains(failed["web1"], "nixos-system-failed-unit-") {
		t.Errorf("closure setting ignored: %s", failed["web1"])
	}
}

// The example tree and the in-repo test tree evaluate too (their builders import the
// test bed's closures by a path relative to the tree).
func TestBuildRepoTrees(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	for _, tree := range []string{repo("examples", "tree"), repo("plan", "testdata", "trees", "basic"), repo("plan", "testdata", "trees", "json")} {
		for _, m := range []string{"ssh", "tf-incus"} {
			if m == "tf-incus" && !strings.HasSuffix(tree, "basic") {
				continue
			}
			drvs := instantiate(t, compute(t, tree, run{method: m, stateDir: t.TempDir()}))
			if len(drvs) == 0 {
				t.Errorf("%s: no node evaluated", tree)
			}
		}
	}
}

// configuration.nix, applied as a module function, imports the right files and sets
// switchyard.plan to plan.json with every _repoPath a path in the tree.
func TestConfigurationEvaluates(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	tree := repo("plan", "testdata", "trees", "basic")
	state := t.TempDir()
	p := compute(t, tree, run{method: "tf-incus", stateDir: state, nodes: []string{"web1"}})
	if err := p.Write(); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(state, "nodes", "web1", "configuration.nix")
	out := runNix(t, "nix-instantiate", "--eval", "--strict", "--json", "--expr", `
		let
		  # nixpkgs' lib.mkDefault, which is mkOverride 1000 (lib/modules.nix).
		  lib.mkDefault = content: { _type = "override"; priority = 1000; inherit content; };
		  m = import `+conf+` { config = { }; inherit lib; pkgs = { }; modulesPath = "/nixpkgs/nixos/modules"; };
		    plan = m.switchyard.plan;
		in {
		  imports = map toString m.imports;
		  modules = map toString plan.modules;
		  motd = toString plan.applications.hello.motd;
		  isPath = builtins.isPath plan.applications.hello.motd;
		  node = plan.node;
		  port = plan.applications.hello.port;
		  guestApi = m.switchyard.guestApi.enable;
		  channel = m.system.installer.channel.enable;
		}`)
	var got struct {
		Imports, Modules []string
		Motd, Node       string
		IsPath, GuestAPI bool
		Port             int
		Channel          override
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := struct {
		Imports, Modules []string
		Motd, Node       string
		IsPath, GuestAPI bool
		Port             int
		Channel          override
	}{
		Imports: []string{"/nixpkgs/nixos/modules/virtualisation/lxc-container.nix",
			filepath.Join(state, "nix", "module.nix"), filepath.Join(state, "nix", "guest-api.nix"),
			filepath.Join(tree, "hosts", "web1.nix"), filepath.Join(tree, "apps", "hello.nix")},
		Modules: []string{filepath.Join(tree, "hosts", "web1.nix"), filepath.Join(tree, "apps", "hello.nix")},
		Motd:    filepath.Join(tree, "files", "motd.txt"), IsPath: true, Node: "web1", Port: 8080, GuestAPI: true,
		Channel: override{Type: "override", Priority: 1000, Content: false},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	for _, f := range got.Imports {
		if strings.HasPrefix(f, "/nixpkgs/") {
			continue // nixpkgs' own module: no nixpkgs here
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("import %s: %v", f, err)
		}
	}
}

// override is a NixOS module system priority wrapper (lib.mkOverride) as JSON.
type override struct {
	Type     string `json:"_type"`
	Priority int    `json:"priority"`
	Content  bool   `json:"content"`
}

func TestPlanReader(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.json")
	writeTestFile(t, plan, `{"a":{"_repoPath":"x/y.nix"},"l":[{"_repoPath":"z"},{"_repoPath":"w","other":1},1],"s":"_repoPath"}`)
	lib := repo("nix", "lib.nix")
	out := runNix(t, "nix-instantiate", "--eval", "--strict", "--json", "--expr", `
		let p = (import `+lib+`).readPlan /some/tree `+plan+`;
		    s = (import `+lib+`).readPlan "/nix/store/abc-source" `+plan+`;
		in {
		  a = toString p.a; aIsPath = builtins.isPath p.a;
		  l0 = toString (builtins.elemAt p.l 0);
		  l1 = builtins.elemAt p.l 1;
		  sA = s.a; sIsString = builtins.isString s.a;
		  inherit (p) s;
		}`)
	want := `{"a":"/some/tree/x/y.nix","aIsPath":true,"l0":"/some/tree/z","l1":{"_repoPath":"w","other":1},"s":"_repoPath","sA":"/nix/store/abc-source/x/y.nix","sIsString":true}`
	if out != want {
		t.Errorf("readPlan\n got %s\nwant %s", out, want)
	}
	for _, bad := range []string{"../etc/passwd", "/etc/passwd", "a/../../b", ".", ""} {
		writeTestFile(t, plan, `{"a":{"_repoPath":"`+bad+`"}}`)
		cmd := exec.Command("nix-instantiate", "--eval", "--strict", "--expr", `((import `+lib+`).readPlan /some/tree `+plan+`).a`)
		if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "not a path inside the tree") {
			t.Errorf("_repoPath %q: %v %s, want a refusal", bad, err, b)
		}
	}
}

// module.nix with a minimal stand-in for nixpkgs' lib: switchyard.chain is written one
// unit per line to /etc/switchyard/chain.
func TestModuleChain(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	out := runNix(t, "nix-instantiate", "--eval", "--strict", "--json", "--expr", `
		let
		  lib = {
		    mkOption = o: o;
		    types = { attrs = "attrs"; str = "str"; listOf = t: "list of ${t}"; };
		    mkIf = cond: v: if cond then v else { };
		    concatMapStrings = f: l: builtins.concatStringsSep "" (map f l);
		  };
		  eval = chain: import `+repo("nix", "module.nix")+` { inherit lib; config.switchyard.chain = chain; };
		  m = eval [ "secret-agent.service" "secrets-ready.service" ];
		in {
		  chain = m.config.environment.etc."switchyard/chain".text;
		  empty = (eval [ ]).config;
		  options = builtins.attrNames m.options.switchyard;
		  key = m.key;
		}`)
	// The options' description text is documentation, owned by module.nix: not compared.
	want := `{"chain":"secret-agent.service\nsecrets-ready.service\n","empty":{},"key":"switchyard/nix/module.nix","options":["chain","plan"]}`
	if out != want {
		t.Errorf("module.nix\n got %s\nwant %s", out, want)
	}
}

// system = "nixos": build.nix evaluates configuration.nix with nixpkgs'
// nixos/lib/eval-config.nix (a stand-in here: no nixpkgs on the test machines).
func TestBuildNixOSSystem(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	tree := copyTree(t, repo("plan", "testdata", "trees", "json"))
	nixpkgs := filepath.Join(t.TempDir(), "nixpkgs")
	writeTestFile(t, filepath.Join(nixpkgs, "nixos", "lib", "eval-config.nix"), `
		{ system, modules }:
		let conf = import (builtins.head modules) { config = { }; lib = { }; pkgs = { }; };
		in {
		  config.system.build.toplevel = derivation {
		    name = "nixos-system-${conf.switchyard.plan.node}";
		    system = builtins.currentSystem;
		    builder = "/bin/sh";
		    args = [ "-c" "echo ${system} > $out" ];
		  };
		}`)
	def, _ := os.ReadFile(filepath.Join(tree, "deployment.json"))
	writeTestFile(t, filepath.Join(tree, "deployment.json"),
		strings.Replace(string(def), `"system": "builder.nix"`, `"system": "nixos", "nixpkgs": "`+nixpkgs+`"`, 1))
	p := compute(t, tree, run{})
	drvs := instantiate(t, p)
	if !strings.HasSuffix(drvs["web1"], "-nixos-system-web1.drv") {
		t.Errorf("drv %s, want eval-config's toplevel", drvs["web1"])
	}
	if b := node(t, p, "web1").Build(); b.System != "nixos" || b.Nixpkgs != nixpkgs {
		t.Errorf("build inputs %+v", b)
	}
}

// The flake's lib and nixosModules outputs need no nixpkgs to evaluate.
func TestFlakeOutputs(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	out := runNix(t, "nix-instantiate", "--eval", "--strict", "--json", "--expr", `
		let o = (import `+repo("flake.nix")+`).outputs { self = { }; nixpkgs = { }; };
		in {
		  readPlan = builtins.isFunction o.lib.readPlan;
		  modules = builtins.attrNames o.nixosModules;
		  default = map toString o.nixosModules.default.imports;
		}`)
	want := `{"default":["` + repo("nix", "module.nix") + `","` + repo("nix", "guest-api.nix") + `"],"modules":["default","guestApi","switchyard"],"readPlan":true}`
	if out != want {
		t.Errorf("flake outputs\n got %s\nwant %s", out, want)
	}
}

// One batch evaluation gives every node the derivation its own evaluation gives, in
// the order of the nodes; a node that fails fails the batch.
func TestBatchEvalMatchesEach(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	tree := plantest.WriteTree(t, filepath.Join(t.TempDir(), "tree"), plantest.Tree{
		Nodes: []plantest.Node{{Name: "web1", Host: "127.0.0.1", Port: 2222}, {Name: "web2", Host: "127.0.0.1", Port: 2223},
			{Name: "web3", Host: "127.0.0.1", Port: 2224}},
	})
	p := compute(t, tree, run{})
	each := instantiate(t, p)
	// web3 before web1: the output follows the order given, not the plan's.
	order := []*Node{node(t, p, "web3"), node(t, p, "web1"), node(t, p, "web2")}
	var builds []Build
	for _, n := range order {
		builds = append(builds, n.Build())
	}
	argv, err := BatchEvalArgv(builds)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := json.Unmarshal([]byte(runNix(t, argv...)), &got); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range order {
		want = append(want, each[n.Name])
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("batch vs one evaluation per node (-want +got)\n%s", d)
	}
	if len(got) == 3 && got[0] == got[1] {
		t.Error("two nodes, one toplevel")
	}

	plantest.BreakNode(t, tree, "web2")
	p = compute(t, tree, run{})
	if err := p.Write(); err != nil {
		t.Fatal(err)
	}
	builds = nil
	for _, n := range p.Nodes {
		builds = append(builds, n.Build())
	}
	if argv, err = BatchEvalArgv(builds); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err == nil {
		t.Errorf("a batch with a broken node printed %q and no error", out)
	}
	if !strings.Contains(stderr.String(), "web2 is broken") {
		t.Errorf("the batch failed with %q, not web2's error", stderr.String())
	}
}
