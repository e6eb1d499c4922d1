package effects

import (
	"context"
	"testing"
	"time"
)

// SPEC 9.8's second half: an unreachable node does not hold the others back.
func TestFleetOtherNodesGoOn(t *testing.T) {
	gone := loadFake(t, "healthy")
	gone.unreachable = true
	var deploys []*Deploy
	for i, f := range []*fakeNode{loadFake(t, "healthy"), gone, loadFake(t, "failed-unit")} {
		f := f
		deploys = append(deploys, &Deploy{Node: []string{"web1", "web2", "web3"}[i], Transport: f,
			Config: testConfig(false), Reporter: &events{}, Source: Source{Toplevel: f.toplevel},
			resolve: func(context.Context, Source) (string, error) { return f.toplevel, nil }, poll: time.Millisecond})
	}
	res := RunFleet(context.Background(), deploys, 2)
	if got := [3]int{res[0].ExitCode, res[1].ExitCode, res[2].ExitCode}; got != [3]int{0, 3, 1} {
		t.Fatalf("exit codes %v, want [0 3 1]", got)
	}
	if res[0].Verdict.Node != "web1" || !res[0].Verdict.OK || res[2].Verdict.Units.Failed[0] != "broken.service" {
		t.Errorf("verdicts %+v", res)
	}
	if ExitCode(res) != 3 {
		t.Errorf("fleet exit %d, want the highest (3)", ExitCode(res))
	}
}
