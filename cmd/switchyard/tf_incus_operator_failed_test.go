package main_test

import (
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed/dnsserver"
)

// Issue 31 item 1: a failed deploy is never reported from an older verdict. After a
// healthy tf-incus-operator apply, the tree moves every node to a closure whose switch
// never activates. OpenTofu skips each node's switchyard_verdict (its deployment
// failed), so the state still holds the healthy pass; the apply must report the
// deploy's own verdict (never-confirmed, not ok, exit 1), not that pass's.
func TestTFIncusOperatorFailedDeployNotOldVerdict(t *testing.T) {
	t.Parallel()
	b := newOperatorBed(t, dnsserver.Kinds()[0])
	op := func(args ...string) run {
		t.Helper()
		return switchyard(t, b.env, append([]string{"tf-incus-operator"}, args...)...)
	}
	r := op("apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)

	setTreeClosure(t, b.tree, "never-activates")
	r = op("apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 1)
	for _, node := range []string{"web1", "web2"} {
		v := verdicts(t, r)[node]
		if v == nil || v["ok"] != false || v["switch"].(map[string]any)["result"] != "never-confirmed" {
			t.Errorf("%s: verdict %v, want not ok, switch never-confirmed\n%s", node, v, strings.Join(logMsgs(r), "\n"))
		}
	}
}
