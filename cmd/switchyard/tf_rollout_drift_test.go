package main_test

import (
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 31 item 2: a rollout stages what the nodes run, not what the state
// remembers. Three nodes applied healthy are switched back by hand to another
// generation; the state still records them on theirs. A rollout (canary=1,batch=1)
// must stage all three, the canary first, as the refreshed plan (each deployment's
// Read) sees them drifted, instead of one stage of "unchanged" nodes past the canary.
func TestTFRolloutStagesDriftedNodes(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	nodes := map[string]*testbed.Node{"web1": bed.Node(t), "web2": bed.Node(t), "web3": bed.Node(t)}
	tree, deployment := treeFor(t, "tf", "healthy", nodes)
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	r := switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	deployed := map[string]string{}
	for name, v := range verdicts(t, r) {
		deployed[name], _ = v["toplevel"].(string)
	}

	before := bed.Build(t, "healthy", "by-hand")
	for name, n := range nodes {
		n.CopyClosure(t, before)
		if code := n.Switch(t, before, "switch"); code != 0 {
			t.Fatalf("%s: switching to %s by hand: exit %d", name, before, code)
		}
	}
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json", "--rollout", "canary=1,batch=1")
	wantCode(t, r, 0)
	msgs := strings.Join(logMsgs(r), "\n")
	for _, want := range []string{"rollout: canary of 3: web1", "rollout: batch 1 of 3: web2", "rollout: batch 2 of 3: web3"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("no %q in the apply's logs:\n%s", want, msgs)
		}
	}
	for name, n := range nodes {
		if got := n.Readlink(t, "/run/current-system"); got != deployed[name] {
			t.Errorf("%s runs %s after the rollout, want its toplevel %s again", name, got, deployed[name])
		}
	}
}
