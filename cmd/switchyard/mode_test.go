package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// genBed is one fresh node in a tree whose builder makes the healthy closure tagged
// by the hello setting gen, which each submission picks: so each gen is a generation.
type genBed struct {
	method string // the method the runs use: ssh, tf (the node's host), ...
	node   *testbed.Node
	tree   string
	env    []string
}

func newGenBed(t *testing.T, bed *testbed.Bed) *genBed { return newGenBedOf(t, bed, "healthy") }

// newGenBedOf is newGenBed with the closure of that name (testbed/closures).
func newGenBedOf(t *testing.T, bed *testbed.Bed, closure string) *genBed {
	return newGenBedFor(t, bed, "ssh", closure)
}

// newGenBedFor is newGenBedOf run through method, which reaches the node by its
// host: ssh or tf.
func newGenBedFor(t *testing.T, bed *testbed.Bed, method, closure string) *genBed {
	nodes, tree, env := fleetTree(t, bed, []string{"web1"}, nil)
	node := nodes["web1"]
	builder := fmt.Sprintf(`{ configuration, plan }:
(import %q { tag = "mode-${plan.node}-${(plan.applications.hello or { }).gen or "a"}"; }).%s
`, filepath.Join(testbed.RepoRoot(), "testbed", "closures"), closure)
	if err := os.WriteFile(filepath.Join(tree, "builder.nix"), []byte(builder), 0o644); err != nil {
		t.Fatal(err)
	}
	bakeHelloSetting(t, tree, "gen", "a")
	return &genBed{method: method, node: node, tree: tree, env: env[1:]}
}

// submission is the DEPLOYMENT of generation gen.
func (g *genBed) submission(gen string) string {
	sub, _ := json.Marshal(map[string]any{"deployment-method": map[string]any{g.method: map[string]any{"sshKeyFile": g.node.KeyFile,
		"applications": map[string]any{"hello": map[string]any{"enable": true, "settings": map[string]any{"gen": gen}}}}}})
	return string(sub)
}

// run runs `<method> <verb>` with the submission of generation gen, JSON output.
func (g *genBed) run(t *testing.T, gen, verb string, args ...string) run {
	return switchyard(t, append([]string{"DEPLOYMENT=" + g.submission(gen)}, g.env...),
		append([]string{g.method, verb, "--tree", g.tree, "--output", "json"}, args...)...)
}

// Issue 34 item 2: apply --mode switch|boot|test, nixos-rebuild's meanings. boot sets
// the system profile and the boot entry, activates nothing and judges nothing
// (switch.result "boot"); test activates and confirms, and leaves the profile and the
// boot entry where they were.
func TestSSHApplyModes(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	g := newGenBed(t, bed)
	node := g.node
	apply := func(gen string, args ...string) (run, map[string]any) {
		r := g.run(t, gen, "apply", args...)
		if r.code == 2 {
			return r, nil
		}
		return r, r.verdict(t)
	}
	running := func() string { return node.Readlink(t, "/run/current-system") }
	profile := func() string {
		return strings.TrimSpace(node.MustExec(t, "readlink", "-f", "/nix/var/nix/profiles/system"))
	}

	r, v := apply("a")
	wantCode(t, r, 0)
	a := fmt.Sprint(v["toplevel"])
	if running() != a || profile() != a {
		t.Fatalf("switch: running %s, profile %s, want both %s", running(), profile(), a)
	}

	r, v = apply("b", "--mode", "boot")
	wantCode(t, r, 0)
	b := fmt.Sprint(v["toplevel"])
	sw, _ := v["switch"].(map[string]any)
	if b == a || sw["result"] != "boot" || v["ok"] != true || v["boot_entry"] != b {
		t.Errorf("--mode boot: verdict switch %v, ok %v, boot_entry %v; want boot, ok, %s", sw, v["ok"], v["boot_entry"], b)
	}
	if running() != a || profile() != b {
		t.Errorf("--mode boot: running %s (want %s, nothing activated), profile %s (want %s)", running(), a, profile(), b)
	}
	u, _ := v["units"].(map[string]any)
	for class, list := range u {
		if l, _ := list.([]any); len(l) > 0 {
			t.Errorf("--mode boot judged units: %s %v", class, l)
		}
	}

	r, v = apply("c", "--mode", "test")
	wantCode(t, r, 0)
	c := fmt.Sprint(v["toplevel"])
	sw, _ = v["switch"].(map[string]any)
	if sw["result"] != "ok" || v["boot_entry"] != b {
		t.Errorf("--mode test: verdict switch %v, boot_entry %v; want ok and the boot entry left on %s", sw, v["boot_entry"], b)
	}
	if running() != c || profile() != b {
		t.Errorf("--mode test: running %s (want %s), profile %s (want it left on %s)", running(), c, profile(), b)
	}

	r, _ = apply("d", "--mode", "dry")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "--mode") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("--mode dry: refusal %q, want one line naming --mode", r.stderr)
	}
	if running() != c {
		t.Errorf("a refused mode changed the node: running %s", running())
	}
}

// Issue 34 item 2: plan on a reachable node copies the planned closure and runs its
// switch-to-configuration dry-activate: the plan event (and the text) name the units a
// switch would stop, leave alone, restart, reload and start; nothing is activated.
func TestSSHPlanDryActivate(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	g := newGenBedOf(t, bed, "ng-switch")
	r := g.run(t, "a", "apply")
	wantCode(t, r, 0)
	running := g.node.Readlink(t, "/run/current-system")

	r = g.run(t, "b", "plan")
	wantCode(t, r, 0)
	var would map[string]any
	for _, e := range r.events {
		if e["kind"] == "plan" && e["node"] == "web1" && e["changed"] == true {
			would, _ = e["would"].(map[string]any)
		}
	}
	// keeper.service changed and says X-RestartIfChanged=false; echo.service changed
	// but has not run (its socket starts it), so nothing is stopped or started.
	want := map[string]string{"stop": "[]", "not_restarted": "[keeper.service]", "restart": "[]", "start": "[]"}
	for k, v := range want {
		if fmt.Sprint(would[k]) != v {
			t.Errorf("plan event would.%s = %v, want %s (would: %v)", k, would[k], v, would)
		}
	}
	if got := g.node.Readlink(t, "/run/current-system"); got != running {
		t.Errorf("plan activated something: /run/current-system %s, was %s", got, running)
	}
	if st := g.node.UnitProperties(t, "echo.socket", "ActiveState")["ActiveState"]; st != "active" {
		t.Errorf("plan stopped echo.socket: %s", st)
	}

	text := switchyard(t, append([]string{"DEPLOYMENT=" + g.submission("b")}, g.env...), "ssh", "plan", "--tree", g.tree)
	wantCode(t, text, 0)
	if !strings.Contains(text.stdout, "web1:   would NOT stop the following changed units: keeper.service") {
		t.Errorf("text plan:\n%s", text.stdout)
	}
}
