package effects_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
)

// noSudoNode answers like a node whose login user has no passwordless sudo.
type noSudoNode struct{ *effectstest.Node }

func (n noSudoNode) Run(ctx context.Context, c effects.Command) (int, error) {
	n.Record("run " + strings.Join(c.Argv, " "))
	return -1, fmt.Errorf("ssh 192.0.2.10:22: user deploy cannot run commands as root: %w", effects.ErrNoSudo)
}

// A missing sudo right stops the wait at once (no waiting for DEPLOY_WAIT_TIMEOUT),
// exit 3, and nothing is copied or switched.
func TestNoSudoStopsTheWaitAtOnce(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	cfg := testConfig(false)
	cfg.WaitTimeout = time.Minute
	ev := &effectstest.Events{}
	d := (&effects.Deploy{Node: "web1", Transport: noSudoNode{f}, Config: cfg, Reporter: ev,
		Source: effects.Source{Toplevel: f.Toplevel}}).WithSeams(func(context.Context, effects.Source) (string, error) { return f.Toplevel, nil }, 100*time.Millisecond)
	start := time.Now()
	res := d.Run(context.Background())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}
	if res.ExitCode != 3 || res.Verdict.OK {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if n := f.Did("run "); n != 1 {
		t.Errorf("%d commands tried, want 1: %v", n, f.Log())
	}
	if f.Did("copy") != 0 || f.Did("finalize") != 0 {
		t.Errorf("the node was changed: %v", f.Log())
	}
	if r := strings.Join(res.Verdict.Reasons, ";"); !strings.Contains(r, "wait: ") || !strings.Contains(r, "sudo") {
		t.Errorf("reasons %q", r)
	}
	if !res.Verdict.Reachable {
		t.Errorf("the node answered; reported unreachable")
	}
}
