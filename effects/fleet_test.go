package effects_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
)

// SPEC 9.8's second half: an unreachable node does not hold the others back.
func TestFleetOtherNodesGoOn(t *testing.T) {
	gone := effectstest.Load(t, "healthy")
	gone.Unreachable = true
	var deploys []*effects.Deploy
	for i, f := range []*effectstest.Node{effectstest.Load(t, "healthy"), gone, effectstest.Load(t, "failed-unit")} {
		f := f
		deploys = append(deploys, (&effects.Deploy{Node: []string{"web1", "web2", "web3"}[i], Transport: f,
			Config: testConfig(false), Reporter: &effectstest.Events{}, Source: effects.Source{Toplevel: f.Toplevel}}).WithSeams(func(context.Context, effects.Source) (string, error) { return f.Toplevel, nil }, time.Millisecond))
	}
	res := effects.RunFleet(context.Background(), deploys, 2, nil)
	if got := [3]int{res[0].ExitCode, res[1].ExitCode, res[2].ExitCode}; got != [3]int{0, 3, 1} {
		t.Fatalf("exit codes %v, want [0 3 1]", got)
	}
	if res[0].Verdict.Node != "web1" || !res[0].Verdict.OK || res[2].Verdict.Units.Failed[0] != "broken.service" {
		t.Errorf("verdicts %+v", res)
	}
	if effects.ExitCode(res) != 3 {
		t.Errorf("fleet exit %d, want the highest (3)", effects.ExitCode(res))
	}
}
