package main_test

import (
	"net"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 13 item 1 (plan --offline): the plan verb makes the plans without contacting
// any node: here no node is listening at all, and every node is reported as would
// be deployed.
func TestSSHPlanOffline(t *testing.T) {
	testbed.Require(t)
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	nodes := map[string]*testbed.Node{"web1": {SSHPort: port}, "web2": {SSHPort: port}}
	tree, deployment := treeFor(t, "ssh", "healthy", nodes)
	r := switchyard(t, []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir(), "DEPLOY_WAIT_TIMEOUT=1"},
		"ssh", "plan", "--offline", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	changed := map[string]any{}
	for _, e := range r.events {
		if e["kind"] == "plan" {
			changed[e["node"].(string)] = e["changed"]
		}
	}
	if changed["web1"] != true || changed["web2"] != true || len(changed) != 2 {
		t.Errorf("plan events %v: want both nodes changed", changed)
	}
	for _, m := range logMsgs(r) {
		if strings.Contains(m, "wait") {
			t.Errorf("the offline plan tried a node: %q", m)
		}
	}
	if n := countLogs(r, "web1", "offline"); n != 1 {
		t.Errorf("logs %q: want web1's offline plan named", logMsgs(r))
	}
	// The closing line says what the plan found in its own terms (issue 33: it read
	// "2 nodes: 0 ok, 2 failed (exit 0)").
	if s := r.events[len(r.events)-1]; s["kind"] != "summary" || s["changed"] != 2.0 || s["ok"] != 2.0 || s["failed"] != 0.0 {
		t.Errorf("summary %v: want 2 changed, 2 planned, 0 failed", s)
	}
	r = switchyard(t, []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir(), "DEPLOY_WAIT_TIMEOUT=1"},
		"ssh", "plan", "--offline", "--tree", tree)
	wantCode(t, r, 0)
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if last := lines[len(lines)-1]; last != "2 nodes: 2 would be deployed, 0 unchanged (exit 0)" {
		t.Errorf("the text plan ends with %q", last)
	}
}
