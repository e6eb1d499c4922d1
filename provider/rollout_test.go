package provider

import (
	"sync"
	"testing"
)

// Issue 14 item 2: a node is held when a node of the stage before it failed, keeping
// the reason of a node held before it (where the rollout stopped); a node before it
// that this run did not deploy (OpenTofu left it alone) holds nothing.
func TestHeldBy(t *testing.T) {
	var outcomes sync.Map
	outcomes.Store("web1", outcome{ok: true})
	outcomes.Store("web2", outcome{})
	outcomes.Store("web3", outcome{})
	outcomes.Store("web4", outcome{held: "held: the rollout stopped at the canary (web0 failed)"})
	for _, tc := range []struct {
		after []string
		want  string
	}{
		{nil, ""},
		{[]string{"web1", "gone"}, ""},
		{[]string{"web1", "web2", "web3"}, "held: the rollout stopped at batch 2 (web2, web3 failed)"},
		{[]string{"web1", "web4"}, "held: the rollout stopped at the canary (web0 failed)"},
	} {
		if got := heldBy(Step{Stage: "batch 3", After: tc.after, AfterStage: "batch 2"}, &outcomes); got != tc.want {
			t.Errorf("after %v: %q, want %q", tc.after, got, tc.want)
		}
	}
}
