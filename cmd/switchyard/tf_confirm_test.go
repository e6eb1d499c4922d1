package main_test

import (
	"context"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 30 over the tf method: the provider's deploy body confirms over a fresh
// connection too. After a healthy apply, the tree moves web1 to a generation whose
// activation stops sshd from taking new connections; the provider's one connection
// survives the switch, the fresh one is refused, so the node switches itself back
// after DEPLOY_CONFIRM_TIMEOUT. The apply fails (exit 1, rolled-back), the node runs
// the healthy generation everywhere, the state records the failure, and a new SSH
// connection is taken again.
func TestTFConfirmCutOffRollsBack(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "tf", "healthy", map[string]*testbed.Node{"web1": node})
	// The provider inherits DEPLOY_* through OpenTofu.
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir(), "DEPLOY_CONFIRM_TIMEOUT=5", "DEPLOY_SWITCH_TIMEOUT=30"}

	r := switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	good, _ := verdicts(t, r)["web1"]["toplevel"].(string)
	if good == "" {
		t.Fatalf("healthy apply: no toplevel in %v", verdicts(t, r))
	}

	setTreeClosure(t, tree, "cuts-ssh")
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 1)
	v := verdicts(t, r)["web1"]
	if v == nil || v["ok"] != false || v["switch"].(map[string]any)["result"] != "rolled-back" {
		t.Errorf("verdict %v, want not ok, switch rolled-back\nstderr:\n%s", v, r.stderr)
	}
	if st := nodeState(t, node); st != [3]string{good, good, good} {
		t.Errorf("node (running, profile, boot entry) %v, want the previous %s everywhere", st, good)
	}
	if st := tofuState(t, env, tree)["web1"]; st == nil || st["ok"] != false {
		t.Errorf("state after the rolled-back apply: %v, want ok false", st)
	}
	if out, err := node.SSH(context.Background(), "echo", "reachable"); err != nil || out != "reachable\n" {
		t.Errorf("a new SSH connection after the rollback: %q, %v", out, err)
	}
	noStaleLock(t, node)
	noSwitchUnitLeft(t, node)
}
