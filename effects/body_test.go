package effects_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/verdict"
)

func testConfig(verdictOnly bool) effects.Config {
	c, _ := effects.ConfigFromEnv(func(string) string { return "" })
	c.VerdictOnly = verdictOnly
	c.SettleAttempts, c.CycleWindows, c.CycleInterval, c.WaitTimeout = 2, 2, 0, 0
	return c
}

func deploy(t *testing.T, f *effectstest.Node, cfg effects.Config) (effects.Result, *effectstest.Events) {
	t.Helper()
	return deployThrough(t, f, f.Toplevel, cfg)
}

// deployThrough is deploy through a transport that wraps a fake node's answers.
func deployThrough(t *testing.T, tr effects.Transport, toplevel string, cfg effects.Config) (effects.Result, *effectstest.Events) {
	t.Helper()
	ev := &effectstest.Events{}
	d := (&effects.Deploy{Node: "web1", Transport: tr, Config: cfg, Reporter: ev,
		Source: effects.Source{Toplevel: toplevel}}).WithSeams(func(context.Context, effects.Source) (string, error) { return toplevel, nil }, time.Millisecond)
	return d.Run(context.Background()), ev
}

func TestDeployPassRunsEveryPhaseInOrder(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	res, ev := deploy(t, f, testConfig(false))
	want := []string{"build", "wait", "push", "snapshot", "switch", "switch-result", "confirm", "owned", "sweep",
		"settle", "cycle-watch", "loop-watch", "classify", "verdict", "report", "finalize", "conclude"}
	if diff := cmp.Diff(want, ev.Started()); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if res.ExitCode != 0 || !res.Verdict.OK || res.Verdict.Switch.Result != verdict.SwitchOK {
		t.Errorf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if f.Did("copy "+f.Toplevel) != 1 || f.Did("finalize "+f.Toplevel) != 1 || f.Did("run systemd-run ") != 1 {
		t.Errorf("copy, switch and finalize must each run once: %v", f.Log())
	}
	if res.Verdict.BootEntry != f.Toplevel {
		t.Errorf("boot_entry %q", res.Verdict.BootEntry)
	}
	// The full phase table is SPEC 4.1's, chain gate included.
	if got := effects.PhaseNames(); len(got) != 19 || got[3] != "chain" {
		t.Errorf("phase table %v", got)
	}
}

func TestVerdictOnlyPassChangesNothing(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	res, ev := deploy(t, f, testConfig(true))
	want := []string{"wait", "chain", "snapshot", "owned", "sweep", "settle", "cycle-watch", "loop-watch",
		"classify", "verdict", "report", "conclude"}
	if diff := cmp.Diff(want, ev.Started()); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	for _, p := range []string{"build", "push", "switch", "switch-result", "confirm", "finalize"} {
		if !slices.Contains(ev.List(), p+":skipped") {
			t.Errorf("%s not reported skipped", p)
		}
	}
	if f.Did("copy") != 0 || f.Did("finalize") != 0 || f.Did("run systemd-run") != 0 || f.Did("revert") != 0 {
		t.Errorf("the verdict-only pass changed the node: %v", f.Log())
	}
	v := res.Verdict
	if res.ExitCode != 0 || v.Pass != verdict.PassVerdictOnly || v.Switch.Result != verdict.SwitchSkipped || v.Toplevel != f.Toplevel {
		t.Errorf("exit %d verdict %+v", res.ExitCode, v)
	}
}

func TestFailedUnitFinalizesBeforeTheNonZeroExit(t *testing.T) {
	f := effectstest.Load(t, "failed-unit")
	res, ev := deploy(t, f, testConfig(false))
	if res.ExitCode != 1 || res.Verdict.Switch.Result != verdict.SwitchUnitsFailed {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if diff := cmp.Diff([]string{"broken.service"}, res.Verdict.Units.Failed); diff != "" {
		t.Errorf("failed (-want +got):\n%s", diff)
	}
	if f.Did("finalize "+f.Toplevel) != 1 {
		t.Errorf("finalize did not run: %v", f.Log())
	}
	// finalize comes right after the report, before conclude (no --reboot: skipped).
	tail := strings.Join(ev.List()[len(ev.List())-7:], " ")
	if tail != "report:start VERDICT report:done finalize:start finalize:done reboot:skipped conclude:start" &&
		!strings.HasPrefix(tail, "VERDICT report:done finalize:start finalize:done reboot:skipped conclude:start") {
		t.Errorf("event tail %q", tail)
	}
}

func TestNeverConfirmedRevertsAndFails(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.Activates = false
	res, ev := deploy(t, f, testConfig(false))
	if res.ExitCode != 1 || res.Verdict.Switch.Result != verdict.SwitchNeverConfirmed {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if f.Did("revert") != 1 || f.Did("finalize") != 0 {
		t.Errorf("want revert and no finalize: %v", f.Log())
	}
	if !slices.Contains(ev.List(), "finalize:skipped") {
		t.Errorf("finalize not reported skipped: %v", ev.List())
	}
	if res.Verdict.BootEntry == f.Toplevel {
		t.Errorf("boot entry reported at the never-activated toplevel")
	}
}

func TestUnreachableNodeStopsAfterWait(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.Unreachable = true
	res, ev := deploy(t, f, testConfig(false))
	if res.ExitCode != 3 || res.Verdict.Reachable || res.Verdict.OK {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if diff := cmp.Diff([]string{"build", "wait", "verdict", "report", "conclude"}, ev.Started()); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if res.Verdict.Units.Failed != nil {
		t.Errorf("units of an unreachable node must be not read")
	}
	if !strings.Contains(strings.Join(res.Verdict.Reasons, ";"), "unreachable") {
		t.Errorf("reasons %v", res.Verdict.Reasons)
	}
}

func TestRestartLoopFailsOnlyTheVerdictOnlyPass(t *testing.T) {
	for _, tc := range []struct {
		verdictOnly bool
		exit        int
	}{{false, 0}, {true, 1}} {
		f := effectstest.Load(t, "restart-loop")
		// The recording's last six samples, looping for about 25 to 50 s; a body reads
		// at most six times with testConfig, so no sample is read twice.
		f.Next = len(f.Samples) - 6
		cfg := testConfig(tc.verdictOnly)
		res, _ := deploy(t, f, cfg)
		if res.ExitCode != tc.exit {
			t.Errorf("verdict-only=%v: exit %d, want %d; loops %+v reasons %v", tc.verdictOnly, res.ExitCode, tc.exit,
				res.Verdict.Units.RestartLoops, res.Verdict.Reasons)
		}
		if loops := res.Verdict.Units.RestartLoops; len(loops) != 1 || loops[0].Unit != "flappy.service" || loops[0].BudgetS != 30 {
			t.Errorf("verdict-only=%v: loops %+v", tc.verdictOnly, loops)
		}
	}
}

func TestSeveredBusIsNotReadNeverNone(t *testing.T) {
	f := effectstest.Load(t, "severed-bus")
	res, _ := deploy(t, f, testConfig(true))
	v := res.Verdict
	if v.SystemState != nil || v.Units.Failed != nil || v.Units.SetAside != nil || v.Units.RestartLoops != nil {
		t.Errorf("severed bus read as state: %+v", v)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit %d, want 3", res.ExitCode)
	}
}

// SPEC 4.5 "unchanged": a node already running the toplevel is judged, not switched.
func TestUnchangedNodeIsJudgedNotSwitched(t *testing.T) {
	f := effectstest.Load(t, "healthy") // its samples show the toplevel running
	ev := &effectstest.Events{}
	d := (&effects.Deploy{Node: "web1", Transport: f, Config: testConfig(false), Reporter: ev, SkipUnchanged: true,
		Source: effects.Source{Toplevel: f.Toplevel}}).WithSeams(func(context.Context, effects.Source) (string, error) { return f.Toplevel, nil }, time.Millisecond)
	res := d.Run(context.Background())
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchUnchanged {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	for _, p := range []string{"switch", "switch-result", "confirm", "finalize"} {
		if !slices.Contains(ev.List(), p+":skipped") {
			t.Errorf("%s not skipped: %v", p, ev.List())
		}
	}
	if f.Did("run systemd-run") != 0 || f.Did("finalize") != 0 {
		t.Errorf("an unchanged node was switched: %v", f.Log())
	}
	if f.Did("copy") != 1 {
		t.Errorf("the copy (one query of the node) must still run once: %v", f.Log())
	}
	if !slices.Contains(ev.Started(), "cycle-watch") {
		t.Errorf("the verdict phases must still run: %v", ev.Started())
	}
}

// The settle takes the sweep's sample as its first when the sweep restarted nothing:
// a healthy node is read once by the snapshot, once by the sweep (which is also the
// settle's) and once per cycle-watch window, never twice in a row.
func TestSettleTakesTheSweepSample(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	cfg := testConfig(false)
	res, _ := deploy(t, f, cfg)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	reads := f.Did("run sh -c " + verdict.ReadScript)
	if want := 2 + cfg.CycleWindows; reads != want {
		t.Errorf("%d samples, want %d (snapshot, sweep and settle, cycle windows)", reads, want)
	}
}
