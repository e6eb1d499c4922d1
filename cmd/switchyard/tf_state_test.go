package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// lineage is the lineage of the tree's OpenTofu state ("" when there is none).
func lineage(t *testing.T, env []string, tree string) string {
	t.Helper()
	r := switchyard(t, env, "tf", "run", "--tree", tree, "--", "state", "pull")
	wantCode(t, r, 0)
	if strings.TrimSpace(r.stdout) == "" {
		return ""
	}
	var s struct{ Lineage string }
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("state pull: %v\n%s", err, r.stdout)
	}
	return s.Lineage
}

// SPEC 7: the configuration reads its own state, so every verb seeds an empty one
// first and never touches one that exists; --node runs leave the other nodes'
// deployments alone; a node taken out of the tree is forgotten with a warning and
// keeps running.
func TestTFSelfStateSubsetAndLeaving(t *testing.T) {
	bed := testbed.Require(t)
	tofuBin := needTofu(t)
	t.Parallel()
	nodes := map[string]*testbed.Node{"web1": bed.Node(t), "web2": bed.Node(t)}
	tree, deployment := treeFor(t, "tf", "healthy", nodes)
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	statePath := filepath.Join(tree, ".switchyard", "tofu", "state", "switchyard.tfstate")

	// The first plan on a fresh state dir seeds an empty state.
	r := switchyard(t, env, "tf", "plan", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	seeded := lineage(t, env, tree)
	if seeded == "" || len(tofuState(t, env, tree)) != 0 {
		t.Fatalf("no empty state seeded (lineage %q)", seeded)
	}
	// Without the seed OpenTofu's own plan fails on the self-read.
	if err := os.Remove(statePath); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tofuBin, "plan", "-input=false", "-no-color")
	cmd.Dir = filepath.Join(tree, ".switchyard", "tofu")
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+filepath.Join(cmd.Dir, "cli.tfrc"))
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Unable to find remote state") {
		t.Errorf("tofu plan without a state: %v\n%s", err, out)
	}

	// --node web1: only web1 is deployed and recorded; the state is seeded again.
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--node", "web1", "--output", "json")
	wantCode(t, r, 0)
	if vs := verdicts(t, r); len(vs) != 1 || vs["web1"]["ok"] != true {
		t.Fatalf("apply --node web1: %v\n%s", vs, r.stderr)
	}
	if st := tofuState(t, env, tree); len(st) != 1 || st["web1"] == nil {
		t.Fatalf("state after apply --node web1: %v", st)
	}
	if got := nodes["web2"].Readlink(t, "/run/current-system"); got != "" {
		t.Errorf("web2 deployed by apply --node web1: %s", got)
	}
	kept := lineage(t, env, tree)
	if kept == "" || kept == seeded {
		t.Errorf("lineage %q after re-seeding (first %q)", kept, seeded)
	}

	// The whole tree: web2 is created, web1 is left as it is.
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if countLogs(r, "web1", "Modifying") != 0 || countLogs(r, "web1", "Creating") != 0 || countLogs(r, "web2", "Creating") == 0 {
		t.Errorf("whole apply: %q", logMsgs(r))
	}
	if l := lineage(t, env, tree); l != kept {
		t.Errorf("an existing state was replaced: lineage %q, was %q", l, kept)
	}
	r = switchyard(t, env, "tf", "run", "--tree", tree, "--", "output", "-json", "deployments")
	wantCode(t, r, 0)
	var out map[string]struct {
		Toplevel string `json:"toplevel"`
		OK       bool   `json:"ok"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out) != 2 || !out["web2"].OK ||
		out["web2"].Toplevel != nodes["web2"].Readlink(t, "/run/current-system") {
		t.Errorf("deployments output: %v %s", err, r.stdout)
	}

	// --node web2 destroy forgets web2 only.
	r = switchyard(t, env, "tf", "destroy", "--tree", tree, "--node", "web2", "--output", "json")
	wantCode(t, r, 0)
	if st := tofuState(t, env, tree); len(st) != 1 || st["web1"] == nil {
		t.Errorf("state after destroy --node web2: %v", st)
	}
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)

	// web2 leaves the tree: the plan warns, the apply forgets it, it keeps running.
	running := nodes["web2"].Readlink(t, "/run/current-system")
	plantest.WriteTree(t, tree, plantest.Tree{Nodes: []plantest.Node{{Name: "web1", Host: "127.0.0.1",
		Port: nodes["web1"].SSHPort, HostKey: nodes["web1"].HostKey}}})
	r = switchyard(t, env, "tf", "plan", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	// web1's nixos_conf covers every file of the tree, deployment.json too (issue 11
	// item 10), but its derivation is the recorded one: OpenTofu leaves it alone.
	if p := planEvents(r); len(p) != 1 || p["web1"] {
		t.Errorf("plan without web2: %v", p)
	}
	if !strings.Contains(strings.Join(logMsgs(r), "\n"), "leaving the state (forgotten; the machines are not touched): web2") {
		t.Errorf("no warning of web2 leaving: %q", logMsgs(r))
	}
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if st := tofuState(t, env, tree); len(st) != 1 || st["web1"] == nil {
		t.Errorf("state after web2 left: %v", st)
	}
	if got := nodes["web2"].Readlink(t, "/run/current-system"); got != running || running == "" {
		t.Errorf("web2 runs %q after being forgotten, ran %q", got, running)
	}
}

// A SWITCHYARD_TOFU that is not OpenTofu is bad input: exit 2 naming the variable,
// and no state is written.
func TestTFBadTofuRefused(t *testing.T) {
	needTofu(t)
	t.Parallel()
	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{Nodes: []plantest.Node{{Name: "web1", Host: "127.0.0.1", Port: 1}}})
	env := []string{`DEPLOYMENT={"deployment-method":{"tf":{}}}`, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	plain := filepath.Join(t.TempDir(), "tofu")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\necho not tofu\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bin := range []string{plain, filepath.Join(t.TempDir(), "missing")} {
		r := switchyard(t, append(env, "SWITCHYARD_TOFU="+bin), "tf", "plan", "--tree", tree)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "SWITCHYARD_TOFU is not a usable OpenTofu") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 2 {
			t.Errorf("%s: stderr %q", bin, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(tree, ".switchyard", "tofu", "state", "switchyard.tfstate")); err == nil {
			t.Errorf("%s: a state was written", bin)
		}
	}
}
