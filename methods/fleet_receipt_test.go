package methods

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/receipt"
	"github.com/switchyard-nix/switchyard/verdict"
)

// Issue 35: a node's receipt is kept as soon as its body ends, not after the whole
// fleet's: slow's body is still running while fast's receipt is made (here it fails,
// the toplevel being no real store path: the warning says it was attempted).
func TestReceiptKeptWhenTheNodeEnds(t *testing.T) {
	f, rep, _ := sshFleet(t, map[string]*effectstest.Node{"fast": {}, "slow": {}}, "fast", "slow")
	f.p.StateDir = t.TempDir()
	f.rec = receipt.NewRecorder(rep)
	attempted := func(node string) bool {
		for _, l := range rep.Logs() {
			if strings.Contains(l, node+": receipt") {
				return true
			}
		}
		return false
	}
	sawFast := make(chan bool, 1)
	f.body = func(ctx context.Context, d *effects.Deploy) effects.Result {
		if d.Node == "slow" {
			deadline := time.Now().Add(5 * time.Second)
			for !attempted("fast") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			sawFast <- attempted("fast")
		}
		return effects.Result{Verdict: verdict.Verdict{Node: d.Node, Reachable: true, OK: true,
			Toplevel: "/nix/store/00000000000000000000000000000000-" + d.Node, Switch: verdict.Switch{Result: "ok"}}}
	}
	codes := map[string]int{}
	f.deployStage(context.Background(), effects.Config{}, f.p.Nodes, codes)
	if !<-sawFast {
		t.Errorf("fast's receipt was not attempted while slow's body ran; logs: %q", rep.Logs())
	}
	if !attempted("slow") {
		t.Errorf("slow's receipt not attempted; logs: %q", rep.Logs())
	}
}
