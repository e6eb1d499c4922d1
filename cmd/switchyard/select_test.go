package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// fleetTree launches fresh nodes of those names and writes a tree of them (the ssh
// methods' settings, each node's tags), whose builder makes each node the healthy
// closure tagged by its name; env is a submission with the nodes' key and an eval cache.
func fleetTree(t *testing.T, bed *testbed.Bed, names []string, tags map[string][]string) (map[string]*testbed.Node, string, []string) {
	t.Helper()
	nodes := launchNodes(t, bed, names)
	var spec plantest.Tree
	for _, name := range names {
		spec.Nodes = append(spec.Nodes, plantest.Node{Name: name, Host: "127.0.0.1", Port: nodes[name].SSHPort,
			HostKey: nodes[name].HostKey, Tags: tags[name]})
	}
	tree := plantest.WriteTree(t, t.TempDir(), spec)
	builder := fmt.Sprintf("{ configuration, plan }: (import %q { tag = \"on-${plan.node}\"; }).healthy\n",
		filepath.Join(testbed.RepoRoot(), "testbed", "closures"))
	if err := os.WriteFile(filepath.Join(tree, "builder.nix"), []byte(builder), 0o644); err != nil {
		t.Fatal(err)
	}
	sub, _ := json.Marshal(map[string]any{"deployment-method": map[string]any{"ssh": map[string]any{"sshKeyFile": nodes[names[0]].KeyFile}}})
	return nodes, tree, []string{"DEPLOYMENT=" + string(sub), "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
}

// Issue 34 item 4: --on selects by names, globs and tags, repeated, with ! to exclude,
// for apply as for every verb that took --node; a selection of nothing is refused with
// exit 2 and one line naming --on, before any node is contacted.
func TestSSHApplyOnSelection(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	names := []string{"web1", "web2", "db1"}
	nodes, tree, env := fleetTree(t, bed, names, map[string][]string{"web1": {"edge"}, "web2": {"edge", "canary"}})
	untouched := func(t *testing.T, picked ...string) {
		t.Helper()
		for _, name := range names {
			got := nodes[name].Readlink(t, "/run/current-system")
			if want := strings.Contains(strings.Join(picked, " "), name); want != (got != "") {
				t.Errorf("%s: /run/current-system -> %q; deployed %v, want %v", name, got, got != "", want)
			}
		}
	}

	for _, sel := range [][]string{{"--on", "cache*"}, {"--on", "@edge", "--on", "!web*"}, {"--on", "@nope"}, {"--on", "web["}} {
		r := switchyard(t, env, append([]string{"ssh", "apply", "--tree", tree}, sel...)...)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "--on") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: refusal %q, want one line naming --on", sel, r.stderr)
		}
	}
	untouched(t)

	r := switchyard(t, env, "ssh", "plan", "--offline", "--tree", tree, "--output", "json", "--on", "web*,db1", "--on", "!@canary")
	wantCode(t, r, 0)
	var planned []string
	for _, e := range r.events {
		if e["kind"] == "plan" {
			planned = append(planned, fmt.Sprint(e["node"]))
		}
	}
	if strings.Join(planned, " ") != "db1 web1" {
		t.Errorf("plan --on 'web*,db1' --on '!@canary': planned %v, want db1 web1", planned)
	}

	r = switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json", "--on", "@edge", "--on", "!@canary")
	wantCode(t, r, 0)
	if s := r.events[len(r.events)-1]; s["kind"] != "summary" || s["nodes"] != 1.0 || s["ok"] != 1.0 {
		t.Errorf("apply --on @edge --on '!@canary': summary %v, want 1 node, ok", s)
	}
	untouched(t, "web1")

	// --node is --on's alias for names, and adds to it.
	r = switchyard(t, env, "ssh", "apply", "--tree", tree, "--node", "db1", "--on", "web2")
	wantCode(t, r, 0)
	untouched(t, "web1", "web2", "db1")
}
