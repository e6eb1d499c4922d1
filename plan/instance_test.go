package plan

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/nix/nixtest"
	"github.com/switchyard-nix/switchyard/plan/definition"
)

// An incus node's configuration.nix takes modulesPath and imports exactly nixpkgs'
// module for its instance type: lxc-container.nix for a container,
// incus-virtual-machine.nix for a VM; an ssh node's imports none. Each generated file
// parses, and applied as a module function with a modulesPath its imports are the
// expected ones. (No nixpkgs here: NixOS itself cannot evaluate them.)
func TestConfigurationInstanceModule(t *testing.T) {
	tool := nixtest.Require(t, "nix-instantiate")[0]
	const mp = "/nixpkgs/nixos/modules"
	for _, tc := range []struct {
		name   string
		incus  *definition.Incus
		want   []string // imports under modulesPath
		header string
	}{
		{"container", &definition.Incus{Image: "i", Type: definition.InstanceContainer},
			[]string{mp + "/virtualisation/lxc-container.nix"}, "{ lib, modulesPath, ... }:"},
		{"container by default", &definition.Incus{Image: "i"},
			[]string{mp + "/virtualisation/lxc-container.nix"}, "{ lib, modulesPath, ... }:"},
		{"virtual-machine", &definition.Incus{Image: "i", Type: definition.InstanceVM},
			[]string{mp + "/virtualisation/incus-virtual-machine.nix"}, "{ lib, modulesPath, ... }:"},
		{"ssh", nil, []string{}, "{ ... }:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := &NodePlan{Node: "n1", Group: "g", Method: "tf-incus", Modules: nil, Incus: tc.incus}
			if tc.incus == nil {
				np.Method, np.SSH = "ssh", &definition.SSH{Host: "h", Port: 22, User: "root"}
			}
			conf := Configuration(np, "../../../tree")
			if !strings.Contains(string(conf), "\n"+tc.header+"\n") {
				t.Errorf("configuration.nix does not start its function with %q:\n%s", tc.header, conf)
			}
			file := filepath.Join(t.TempDir(), "state", "nodes", "n1", ConfigurationFile)
			writeTestFile(t, file, string(conf))
			if out, err := exec.Command(tool, "--parse", file).CombinedOutput(); err != nil {
				t.Fatalf("configuration.nix does not parse: %v\n%s\n%s", err, out, conf)
			}
			out := runNix(t, tool, "--eval", "--strict", "--json", "--expr", `
				let
				  mp = "`+mp+`";
				  m = import `+file+` { config = { }; lib = { }; pkgs = { }; modulesPath = mp; };
				  n = builtins.stringLength mp;
				in builtins.filter (i: builtins.isString i && builtins.substring 0 n i == mp) m.imports`)
			var got []string
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("imports from modulesPath (-want +got)\n%s", d)
			}
		})
	}
}

// fakeNixpkgs is a stand-in for nixpkgs (none on the test machines) whose
// nixos/lib/eval-config.nix calls the configuration with `modulesPath` as the real one
// does (`builtins.toString ../modules`), imports the modules it imports from there, and
// names the toplevel after the node and the instance kinds those stubs declare.
func fakeNixpkgs(t *testing.T) string {
	t.Helper()
	np := filepath.Join(t.TempDir(), "nixpkgs")
	writeTestFile(t, filepath.Join(np, "nixos", "lib", "eval-config.nix"), `
		{ system, modules }:
		let
		  modulesPath = builtins.toString ../modules;
		  conf = import (builtins.head modules) { config = { }; lib = { }; pkgs = { }; inherit modulesPath; };
		  n = builtins.stringLength modulesPath;
		  fromNixpkgs = builtins.filter (i: builtins.isString i && builtins.substring 0 n i == modulesPath) conf.imports;
		  kinds = map (i: (import i).kind) fromNixpkgs;
		in {
		  config.system.build.toplevel = derivation {
		    name = "nixos-system-${conf.switchyard.plan.node}-${builtins.concatStringsSep "+" kinds}";
		    system = builtins.currentSystem;
		    builder = "/bin/sh";
		    args = [ "-c" "echo ${system} > $out" ];
		  };
		}`)
	writeTestFile(t, filepath.Join(np, "nixos", "modules", "virtualisation", "lxc-container.nix"), `{ kind = "lxc-container"; }`)
	writeTestFile(t, filepath.Join(np, "nixos", "modules", "virtualisation", "incus-virtual-machine.nix"), `{ kind = "incus-virtual-machine"; }`)
	return np
}

// examples/tree-nixos (system = "nixos", nixpkgs the NIX_PATH entry) plans a container
// and a VM over tf-incus; with a nixpkgs on NIX_PATH build.nix hands each node's
// configuration to nixpkgs' eval-config.nix, which resolves the instance module from
// its own modulesPath. Without one the tree still plans, and the build is refused.
func TestTreeNixOS(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	tree := repo("examples", "tree-nixos")

	t.Setenv("NIX_PATH", "")
	p := compute(t, tree, run{method: "tf-incus", stateDir: t.TempDir()})
	if b := node(t, p, "web1").Build(); b.System != "nixos" || b.Nixpkgs != "" {
		t.Errorf("without NIX_PATH: build inputs %+v, want system nixos and no nixpkgs", b)
	}

	np := fakeNixpkgs(t)
	t.Setenv("NIX_PATH", "nixpkgs="+np)
	p = compute(t, tree, run{method: "tf-incus", stateDir: t.TempDir()})
	if b := node(t, p, "web1").Build(); b.Nixpkgs != np {
		t.Errorf("nixpkgs %q, want the NIX_PATH entry %q", b.Nixpkgs, np)
	}
	for name, typ := range map[string]string{"web1": "container", "vm1": "virtual-machine"} {
		if !strings.Contains(string(node(t, p, name).PlanJSON), `"type":"`+typ+`"`) {
			t.Errorf("%s: plan.json does not hold its instance type %s: %s", name, typ, node(t, p, name).PlanJSON)
		}
	}
	drvs := instantiate(t, p)
	for name, kind := range map[string]string{"web1": "lxc-container", "vm1": "incus-virtual-machine"} {
		if !strings.HasSuffix(drvs[name], "-nixos-system-"+name+"-"+kind+".drv") {
			t.Errorf("%s: toplevel %s, want one evaluated with nixpkgs' %s.nix alone", name, drvs[name], kind)
		}
	}
	for _, n := range p.Nodes {
		if _, err := os.Stat(filepath.Join(n.Dir, ConfigurationFile)); err != nil {
			t.Error(err)
		}
	}
}

// The guest-API unit is ordered after incus-agent.service everywhere (in a VM the agent
// serves /dev/incus/sock), and wants it only where the Incus agent is enabled (a VM
// through nixpkgs' incus-virtual-machine.nix): a container wants no unit it lacks.
// nix/guest-api.nix with a minimal stand-in for nixpkgs' lib and pkgs.
func TestGuestAPIAfterIncusAgent(t *testing.T) {
	tool := nixtest.Require(t, "nix-instantiate")[0]
	out := runNix(t, tool, "--eval", "--strict", "--json", "--expr", `
		let
		  lib = {
		    mkEnableOption = d: d;
		    mkOption = o: o;
		    types = { str = "str"; };
		    mkIf = cond: v: if cond then v else { };
		    optional = cond: v: if cond then [ v ] else [ ];
		  };
		  pkgs = { writeShellScript = name: text: "/script"; curl = "/curl"; jq = "/jq"; };
		  unit = extra: (import `+repo("nix", "guest-api.nix")+` {
		    inherit lib pkgs;
		    config = { switchyard.guestApi = { enable = true; prefix = "user.switchyard."; }; } // extra;
		  }).config.systemd.services.switchyard-guest-api;
		  pick = u: { inherit (u) after wants; condition = u.unitConfig.ConditionPathExists; };
		in {
		  container = pick (unit { });
		  agentOff = pick (unit { virtualisation.incus.agent.enable = false; });
		  vm = pick (unit { virtualisation.incus.agent.enable = true; });
		}`)
	want := `{"agentOff":{"after":["incus-agent.service"],"condition":"/dev/incus/sock","wants":[]},` +
		`"container":{"after":["incus-agent.service"],"condition":"/dev/incus/sock","wants":[]},` +
		`"vm":{"after":["incus-agent.service"],"condition":"/dev/incus/sock","wants":["incus-agent.service"]}}`
	if out != want {
		t.Errorf("guest-api unit\n got %s\nwant %s", out, want)
	}
}

// The flake's module-eval checks build our modules on each instance module a generated
// configuration can import: one check per InstanceModule result.
func TestModuleEvalCoversEveryInstanceModule(t *testing.T) {
	flake, err := os.ReadFile(repo("flake.nix"))
	if os.IsNotExist(err) {
		t.Skip("no flake.nix: the package's source (nix/src.nix) leaves it out")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{definition.InstanceContainer, definition.InstanceVM} {
		m := strings.TrimPrefix(InstanceModule(&definition.Incus{Type: typ}), "/")
		if !strings.Contains(string(flake), `instanceModule = "`+m+`";`) {
			t.Errorf("flake.nix has no module-eval check with instanceModule %s (type %s)", m, typ)
		}
	}
}
