package effects

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// sweepTargets are the failed units the closure wants, minus the ones a
// Condition*= skipped: restarting them is what the sweep does.
func sweepTargets(s verdict.Sample, wanted map[string]bool) []string {
	var out []string
	for name, u := range s.Units {
		if wanted[name] && u.ActiveState == "failed" && u.ConditionResult != "no" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// 10. sweep
func (r *run) sweep(ctx context.Context) error {
	s := r.sample(ctx)
	targets := sweepTargets(s, r.wanted)
	if len(targets) == 0 {
		r.sweptQuiet = true
		return nil
	}
	r.log("info", "%s: sweep: restarting %s", r.d.Node, strings.Join(targets, ", "))
	rctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, _, err := r.exec(rctx, append([]string{"systemctl", "restart", "--"}, targets...)...); err != nil {
		r.log("warn", "%s: sweep: %v", r.d.Node, err)
	}
	return nil
}

// 11. settle: sample until systemd has no jobs queued. The sweep's sample, taken a
// moment before with nothing restarted since, counts as the first settle sample: a
// second read right after it would show the same node and cost the node another
// sample's processes (on a fleet sharing a machine, every sample is CPU the others
// wait for).
func (r *run) settle(ctx context.Context) error {
	for i := 0; i < r.cfg.SettleAttempts; i++ {
		var s verdict.Sample
		if i == 0 && r.sweptQuiet {
			s = r.samples[len(r.samples)-1]
		} else {
			s = r.sample(ctx)
		}
		if s.Jobs != nil && len(s.Jobs) == 0 {
			return nil
		}
		if i+1 < r.cfg.SettleAttempts {
			if err := sleep(ctx, r.d.poll); err != nil {
				return stopWith(exitcode.Infra, "%w", err)
			}
		}
	}
	return nil
}

// 12. cycle watch: a sample every CycleInterval, for CycleWindows windows. The
// interval runs from one sample's start to the next's, so the time a sample itself
// takes (long on a busy node, or on a fleet sharing a machine) does not stretch the
// windows or the watch (nextSampleIn).
func (r *run) cycleWatch(ctx context.Context) error {
	if len(r.samples) == 0 {
		r.sample(ctx)
	}
	r.cycleStart = len(r.samples) - 1
	began := windowStart(r.samples[r.cycleStart], time.Now())
	for w := 0; w < r.cfg.CycleWindows; w++ {
		if err := sleep(ctx, nextSampleIn(began, time.Now(), r.cfg.CycleInterval)); err != nil {
			return stopWith(exitcode.Infra, "%w", err)
		}
		began = time.Now()
		r.sample(ctx)
	}
	return nil
}

// windowStart is when the cycle watch's first window began: when the sample it
// starts from (last, the one before the watch) was taken, as every later window
// begins when its sample is taken. So a slow sample before the watch (a loaded node
// answers in seconds) does not lengthen the first window by its own time. A sample
// with no time, or one stamped after now, starts it now.
func windowStart(last verdict.Sample, now time.Time) time.Time {
	if last.At.IsZero() || last.At.After(now) {
		return now
	}
	return last.At
}

// nextSampleIn is how long the cycle watch waits, at now, for its next sample when
// the last one began at began: until an interval after began, but at least half an
// interval, so that after a sample that took longer than the interval the next
// window still has a length in which a unit can change.
func nextSampleIn(began, now time.Time, interval time.Duration) time.Duration {
	return max(interval-now.Sub(began), interval/2)
}

// loopWatchLimit bounds the loop watch's waiting: a suspect that neither restarts
// again nor stays up for a stable period (60 s) by then is judged as it is.
const loopWatchLimit = 75 * time.Second

// 13. loop watch: the units systemd restarted automatically and that have not been
// up for a stable period since (verdict.LoopSuspects) are watched until their
// cadence is known: sampled until systemd's restart counter shows a second restart,
// or they stay up, fail, or loopWatchLimit passes. A loop slower than the earlier
// phases' windows is found so. Then each suspect's restart history is read from the
// journal, once, so the classifier measures the loop by systemd's record, across
// passes, rather than by what the samples happened to catch.
func (r *run) loopWatch(ctx context.Context) error {
	if len(r.samples) == 0 {
		r.sample(ctx)
	}
	deadline := time.Now().Add(loopWatchLimit)
	for time.Now().Before(deadline) && r.cadenceUnknown() {
		if err := sleep(ctx, r.d.poll); err != nil {
			return stopWith(exitcode.Infra, "%w", err)
		}
		r.sample(ctx)
	}
	final := r.samples[len(r.samples)-1]
	r.restarts = map[string][]verdict.Restart{}
	for _, name := range verdict.LoopSuspects(final) {
		out, code, err := r.exec(ctx, verdict.RestartsArgv(name, final.Units[name].NRestarts)...)
		if err == nil && code != 0 {
			err = fmt.Errorf("journalctl exited %d", code)
		}
		var hist []verdict.Restart
		if err == nil {
			hist, err = verdict.ParseRestarts([]byte(out))
		}
		if err != nil {
			// Judged from the samples alone (the classifier's fallback).
			r.log("warn", "%s: loop watch: restart history of %s: %v", r.d.Node, name, err)
			continue
		}
		r.restarts[name] = hist
	}
	return nil
}

// cadenceUnknown: some loop suspect of the last sample has restarted fewer times
// than a loop needs, so whether it loops is not known yet.
func (r *run) cadenceUnknown() bool {
	final := r.samples[len(r.samples)-1]
	for _, name := range verdict.LoopSuspects(final) {
		if final.Units[name].NRestarts < verdict.MinLoopRestarts {
			return true
		}
	}
	return false
}

// 14. classify
func (r *run) classify(ctx context.Context) error {
	final := r.samples[len(r.samples)-1]
	r.classes = verdict.Classify(verdict.Input{
		Pass:         r.v.Pass,
		Samples:      r.samples,
		CycleStart:   r.cycleStart,
		Owned:        r.owned,
		Wanted:       r.wanted,
		Activated:    final.Activated,
		LoopGrace:    r.cfg.LoopGrace,
		SettleWindow: time.Duration(r.cfg.SettleAttempts) * r.d.poll,
		Restarts:     r.restarts,
		Before:       r.before,
		Switch:       r.switchLog,
	})
	return nil
}

// 15. verdict
func (r *run) judge(ctx context.Context) error {
	v := &r.v
	v.Units = r.classes
	v.PhasesMS = r.phasesMS
	switch {
	case r.cfg.Mode == ModeTest:
		v.BootEntry = r.bootEntry // a test activation leaves the boot entry alone
	case r.confirmed || r.booted:
		v.BootEntry = v.Toplevel
	case r.revertedTo != "":
		v.BootEntry = r.revertedTo
	case r.switched:
		v.BootEntry = r.running // reverted to the running generation
	default:
		v.BootEntry = r.bootEntry
	}
	exit, reasons := r.exit, append([]string(nil), r.reasons...)
	if len(r.samples) > 0 && !r.booted {
		final := r.samples[len(r.samples)-1]
		if final.SystemState != "" {
			st := final.SystemState
			v.SystemState = &st
		}
		if final.Units == nil && errors.Is(r.lastReadErr, ErrUnreachable) {
			v.Reachable = false
		}
		_, code, why := verdict.Decide(*v)
		exit = max(exit, code)
		reasons = append(why, reasons...)
	}
	v.ExitCode = exit
	v.OK = exit == exitcode.OK
	if reasons == nil {
		reasons = []string{}
	}
	v.Reasons = dedupe(reasons)
	r.exit = exit
	return nil
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// 16. report
func (r *run) report(ctx context.Context) error {
	r.d.Reporter.Verdict(r.v)
	return nil
}

// 17. finalize
func (r *run) finalize(ctx context.Context) error {
	r.journalRecord(JournalFinalize)
	testPause(ctx, "SWITCHYARD_TEST_PAUSE_IN_FINALIZE")
	if err := r.pointBootAt(ctx, r.v.Toplevel); err != nil {
		return failWith(exitcode.Infra, "%w", err)
	}
	r.bootSet = true
	return nil
}

// pointBootAt points the system profile and the default boot entry at toplevel under
// the node lock (finalize, and apply --mode boot's switch); the error says what was
// not set and why, a lost lock first.
func (r *run) pointBootAt(ctx context.Context, toplevel string) error {
	err := r.fencedStep(ctx, func(ctx context.Context) error { return r.d.Transport.FinalizeBootloader(ctx, toplevel) })
	if err == nil {
		return nil
	}
	if lost := r.lockLost(ctx, err); lost != nil {
		return fmt.Errorf("%w: the system profile and boot entry were not set (%v)", lost, err)
	}
	return fmt.Errorf("setting the system profile and boot entry: %w", err)
}

// 18. conclude settles the node's exit code of SPEC 2.1: the verdict's, raised by
// what failed after the report (finalize: exit 3). The report is already out, so a
// raise is named here in a log event, with its reasons.
func (r *run) conclude(ctx context.Context) error {
	// The journal says "done" once nothing this body started is left unread on the
	// node; a body cancelled in the middle (or whose switch result was never read)
	// leaves its entry for the rerun to look up, as a killed one does.
	// A body that only looked the entry up (and found nothing to do) closes it too.
	if (r.journaled || r.resumed) && ctx.Err() == nil && (!r.switchStarted || r.switched) {
		r.journalRecord(JournalDone)
	}
	r.releaseLock(ctx)
	if r.exit <= r.v.ExitCode {
		return nil
	}
	r.log("error", "%s: conclude: exit %d, not the reported verdict's %d: %s",
		r.d.Node, r.exit, r.v.ExitCode, strings.Join(r.lateReasons(), "; "))
	return nil
}

// lateReasons are the reasons raised after the report: those the verdict lacks.
func (r *run) lateReasons() []string {
	var late []string
	for _, why := range r.reasons {
		if !slices.Contains(r.v.Reasons, why) {
			late = append(late, why)
		}
	}
	return late
}
