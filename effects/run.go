package effects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/localcmd"
	"github.com/switchyard-nix/switchyard/verdict"
)

// run is one body's state as the phases fill it in, in the parts the phases own.
type run struct {
	d   *Deploy
	cfg Config
	outcome
	switchState
	sampling
	judging
	journalState
	lock *heldLock // the node's deploy lock, while this body holds it (lock.go)
}

// outcome is what the node's verdict is made of, filled by every phase and read by
// report and conclude: the verdict, the exit code and why, each phase's time.
type outcome struct {
	v        verdict.Verdict
	exit     int
	reasons  []string
	phasesMS map[string]int64
}

// switchState is what build, snapshot, switch, switch-result, confirm and finalize
// learn of the generations (switch.go, confirm.go).
type switchState struct {
	toplevel  string // the generation being judged
	previous  string // the running generation before the switch
	running   string // the running generation after a switch that never activated
	bootEntry string // the boot entry before the switch
	// confirmed: finalize points the system profile and the boot entry at the new
	// toplevel: /run/current-system resolved to it after the switch, or the node
	// already ran it with a profile or boot entry elsewhere, or the switch installed
	// its boot entry and needs a reboot (exit 100).
	confirmed bool
	unchanged bool // the node already ran the toplevel: no switch
	booted    bool // apply --mode boot set the profile and boot entry: nothing to judge
	// bootSet: the system profile and the default boot entry point at the toplevel
	// (finalize or --mode boot set them, or they already did): what --reboot needs.
	bootSet       bool
	switched      bool // the switch ran (its result was read)
	switchStarted bool // systemd-run answered: the switch's unit was started
	// switchTimedOut: the switch was stopped at DEPLOY_SWITCH_TIMEOUT. Its generation
	// is never confirmed, whatever /run/current-system says (SPEC 4.3).
	switchTimedOut bool
	revertedTo     string      // the generation the boot entry went back to, when not the running one
	switchUnit     string      // the transient unit running the switch
	current        string      // /run/current-system as the switch's end left it ("": not read)
	record         *nodeRecord // the node's record of the switch (SPEC 4.6); nil: none
	// switchLog is what switch-to-configuration said it did with units, read from its
	// unit's journal once it ended; zero when not read.
	switchLog verdict.SwitchLog
}

// sampling is the systemd samples the gates and watches take (chain, sweep, settle,
// cycle watch, loop watch) and what they decided about the next one.
type sampling struct {
	chainDown bool // the chain gate did not pass: no sweep
	// sweptQuiet: the sweep's sample is the last one and the sweep restarted nothing,
	// so the settle may take it as its first sample.
	sweptQuiet   bool
	samples      []verdict.Sample
	sampler      verdict.Sampler // decides which units each sample reads in full
	chainMembers []string        // the chain gate's members: read in full while it waits
	lastReadErr  error           // why the last sample could not be read, if it could not
	cycleStart   int
	restarts     map[string][]verdict.Restart // restart history of the loop suspects (loop watch)
	// before is the snapshot's sample, taken before the switch: the units failed then
	// are read in full in every later sample, so the classifier can tell the ones the
	// switch only reset from the ones that ran again.
	before verdict.Sample
}

// judging is what owned reads and classify decides from the samples (judge.go).
type judging struct {
	owned   map[string]bool
	wanted  map[string]bool
	classes verdict.Classes
}

// journalState is the journal's part (journal.go): the entry a killed run left, once
// read; whether this body wrote one; whether it took over the killed run's switch unit.
type journalState struct {
	lastRun     *JournalEntry
	journalRead bool
	journaled   bool
	resumed     bool   // the snapshot looked the killed run's entry up on the node
	journalNote string // and what it found (Result.Journal)
	adopted     bool
}

func newRun(d *Deploy) *run {
	if d.resolve == nil {
		d.resolve = resolveToplevel
	}
	if d.poll == 0 {
		d.poll = pollInterval
	}
	pass := verdict.PassDeploy
	if d.Config.VerdictOnly {
		pass = verdict.PassVerdictOnly
	}
	return &run{
		d:   d,
		cfg: d.Config,
		outcome: outcome{
			phasesMS: map[string]int64{},
			v: verdict.Verdict{
				Kind: "verdict", Node: d.Node, Target: d.Transport.Target(), Pass: pass,
				Switch: verdict.Switch{Result: verdict.SwitchSkipped}, StrictUnits: d.Config.StrictUnits,
			},
		},
	}
}

func (r *run) verdictOnly() bool { return r.cfg.VerdictOnly }

// raise lifts the node's exit code and records why.
func (r *run) raise(code int, reason string) {
	if code > r.exit {
		r.exit = code
	}
	if reason != "" {
		r.reasons = append(r.reasons, reason)
	}
}

func (r *run) log(level, format string, args ...any) {
	r.d.Reporter.Log(r.d.Node, level, fmt.Sprintf(format, args...))
}

// swPath is the directory appended to PATH on the node for every command.
func (r *run) swPath() []string {
	if r.toplevel != "" {
		return []string{r.toplevel + "/sw/bin"}
	}
	return []string{"/run/current-system/sw/bin"}
}

// exec runs argv on the node and returns its stdout and exit status.
func (r *run) exec(ctx context.Context, argv ...string) (string, int, error) {
	out, _, code, err := r.command(ctx, argv)
	return out, code, err
}

// execCheck is exec where a non-zero status is an error carrying stderr's last line.
func (r *run) execCheck(ctx context.Context, argv ...string) (string, error) {
	out, errOut, code, err := r.command(ctx, argv)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", fmt.Errorf("%s exited %d: %s", argv[0], code, localcmd.LastLine(errOut))
	}
	return out, nil
}

// command runs argv on the node, with the toplevel's sw/bin on PATH.
func (r *run) command(ctx context.Context, argv []string) (stdout, stderr string, code int, err error) {
	var out, errOut bytes.Buffer
	code, err = r.d.Transport.Run(ctx, Command{Argv: argv, Stdout: &out, Stderr: &errOut, Path: r.swPath()})
	return out.String(), errOut.String(), code, err
}

// read takes one sample of the node's systemd state (one round trip). Every sample
// reads in full the owned and wanted units (known from phase 9 on) and the chain's
// members; the first also the units that trigger others, later ones what the sampler
// learnt to watch; every other unit cheaply unless the node finds it unsteady or
// changed (verdict.Sampler).
func (r *run) read(ctx context.Context) (verdict.Sample, error) {
	full := map[string]bool{}
	for _, set := range []map[string]bool{r.owned, r.wanted} {
		for name := range set {
			full[name] = true
		}
	}
	for _, name := range r.chainMembers {
		full[name] = true
	}
	for name, u := range r.before.Units {
		if u.ActiveState == "failed" {
			full[name] = true
		}
	}
	r.sampler.Full = full
	return r.sampler.Read(ctx, func(ctx context.Context, argv []string, stdout io.Writer) (int, error) {
		return r.d.Transport.Run(ctx, Command{Argv: argv, Stdout: stdout, Path: r.swPath()})
	})
}

// sample reads the node and keeps the sample; a failed read keeps a "not read"
// sample, so the verdict never reports stale state as current.
func (r *run) sample(ctx context.Context) verdict.Sample {
	s, err := r.read(ctx)
	r.lastReadErr = err
	if err != nil {
		r.log("warn", "%s: reading systemd state: %v", r.d.Node, err)
		s = verdict.Sample{At: time.Now()}
	}
	r.samples = append(r.samples, s)
	return s
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// 1. build
func (r *run) build(ctx context.Context) error {
	src := r.d.Source
	if src.Evaluate != nil {
		drv, how, err := src.Evaluate(ctx)
		if err != nil {
			return stopWith(exitcode.Infra, "evaluation failed: %w", err)
		}
		r.log("info", "%s: build: %s %s", r.d.Node, how, drv)
		src = Source{Drv: drv}
	}
	if src.Drv != "" {
		if out, ok := builtOutput(ctx, src.Drv); ok {
			r.log("info", "%s: build: already built %s", r.d.Node, out)
			src = Source{Toplevel: out}
		}
	}
	top, err := r.d.resolve(ctx, src)
	if err != nil {
		return stopWith(exitcode.Infra, "%w", err)
	}
	r.toplevel = top
	r.v.Toplevel = top
	return nil
}

// 2. wait for the node
func (r *run) wait(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.WaitTimeout)
	var last string
	var lastErr error
	for {
		remaining := time.Until(deadline)
		attempt := min(max(remaining, 2*time.Second), 10*time.Second)
		actx, cancel := context.WithTimeout(ctx, attempt)
		out, _, err := r.exec(actx, "systemctl", "is-system-running")
		cancel()
		if errors.Is(err, ErrRefused) {
			return stopWith(exitcode.Refused, "%w", err)
		}
		if errors.Is(err, ErrNoSudo) {
			// The node answered; waiting will not give the user root.
			r.v.Reachable = true
			return stopWith(exitcode.Infra, "%w", err)
		}
		last, lastErr = strings.TrimSpace(out), err
		// systemd answered: the node is reachable, whatever its state.
		r.v.Reachable = err == nil && last != ""
		if r.v.Reachable {
			switch last {
			case "running", "degraded", "starting":
				return nil
			}
		}
		if ctx.Err() != nil {
			return stopWith(exitcode.Infra, "%w", ctx.Err())
		}
		if time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, min(r.d.poll, max(time.Until(deadline), 0))); err != nil {
			return stopWith(exitcode.Infra, "%w", err)
		}
	}
	if r.v.Reachable && lastErr == nil {
		return stopWith(exitcode.Infra, "the node answers but is not up within %s: systemd is %q%s",
			r.cfg.WaitTimeout, last, systemStateMeaning[last])
	}
	if lastErr != nil {
		return stopWith(exitcode.Infra, "unreachable within %s: %v", r.cfg.WaitTimeout, lastErr)
	}
	return stopWith(exitcode.Infra, "unreachable within %s: systemd answers %q", r.cfg.WaitTimeout, last)
}

// systemStateMeaning explains the states of systemctl is-system-running in which
// the body does not deploy (systemctl(1)).
var systemStateMeaning = map[string]string{
	"maintenance":  " (rescue or emergency mode)",
	"stopping":     " (shutting down)",
	"initializing": " (early boot)",
	"offline":      " (systemd is not PID 1)",
}

// 3. push the closure
func (r *run) push(ctx context.Context) error {
	// What a killed run left is read before the lock: its entry may name that run's
	// lock. It is overwritten only once this body holds the lock.
	r.journalLoad()
	// The deploy lock comes first: a deployer refused by it has changed nothing,
	// not even the node's store.
	if err := r.acquireLock(ctx); err != nil {
		return err
	}
	if e := r.lastRun; e == nil || e.Toplevel != r.toplevel || (e.Phase != JournalSwitch && e.Phase != JournalFinalize) {
		// An entry of this toplevel's interrupted switch or finalize is kept until
		// the snapshot has looked it up on the node.
		r.journalRecord(JournalPush)
	}
	links, err := linkPermanentMACs(r.toplevel)
	if err != nil {
		return stopWith(exitcode.Infra, "reading .link files: %w", err)
	}
	if len(links) > 0 {
		out, err := r.execCheck(ctx, "ip", "-o", "link", "show")
		if err != nil {
			return stopWith(exitcode.Infra, "reading the node's MAC addresses: %w", err)
		}
		if refused := macGate(links, parsePermanentMACs(out)); refused != nil {
			return stopWith(exitcode.Refused, "PermanentMACAddress gate: %s match no permanent MAC address of the node; refused before the copy",
				strings.Join(refused, ", "))
		}
	}
	if err := r.d.Transport.CopyClosure(ctx, []string{r.toplevel}); err != nil {
		if errors.Is(err, ErrRefused) {
			return stopWith(exitcode.Refused, "%w", err)
		}
		return stopWith(exitcode.Infra, "copy failed: %w", err)
	}
	if c, ok := r.d.Transport.(CopyCounter); ok {
		paths, missing, sent, bytes := c.CopyCounts()
		r.log("info", "%s: push: %d paths in the closure, %d missing, %d sent (%d bytes)%s", r.d.Node, paths, missing, sent, bytes,
			substituted(r.d.Transport, missing))
		if cr, ok := r.d.Reporter.(CopyReporter); ok {
			cr.Copied(r.d.Node, bytes)
		}
	}
	return nil
}

// substituted is the push line's account of the node's own caches: how many of
// the missing paths came from them, or why none did. Nothing when the node was not
// asked (substitution off) or lacked nothing.
func substituted(t Transport, missing int) string {
	c, ok := t.(SubstituteCounter)
	if !ok {
		return ""
	}
	asked, n, failed := c.CopySubstituted()
	switch {
	case !asked || missing == 0:
		return ""
	case failed != "":
		return fmt.Sprintf(", %d from the node's caches (they failed: %s)", n, failed)
	}
	return fmt.Sprintf(", %d from the node's caches", n)
}

// 5. snapshot
func (r *run) snapshot(ctx context.Context) error {
	s, err := r.read(ctx)
	if err != nil {
		r.v.Reachable = !errors.Is(err, ErrUnreachable)
		return stopWith(exitcode.Infra, "reading the node: %w", err)
	}
	r.before = s
	r.previous, r.bootEntry = s.CurrentSystem, s.BootEntry
	r.v.Previous = s.CurrentSystem
	if !r.verdictOnly() && r.resume(ctx, s.CurrentSystem) {
		// The journal decided: a killed run's switch is this run's, or finalize runs again.
	} else if r.d.SkipUnchanged && !r.verdictOnly() && r.cfg.Mode != ModeBoot && s.CurrentSystem != "" && s.CurrentSystem == r.toplevel {
		r.unchanged = true
		r.v.Switch.Result = verdict.SwitchUnchanged
		r.checkFinalized(ctx, s.BootEntry)
	}
	if r.verdictOnly() {
		if s.CurrentSystem == "" {
			return stopWith(exitcode.Infra, "no running generation: /run/current-system is missing")
		}
		r.toplevel = s.CurrentSystem
		r.v.Toplevel = s.CurrentSystem
	}
	if s.Units != nil {
		var failed []string
		for name, u := range s.Units {
			if u.ActiveState == "failed" {
				failed = append(failed, name)
			}
		}
		sort.Strings(failed)
		if len(failed) > 0 {
			r.log("info", "%s: failed before the switch: %s", r.d.Node, strings.Join(failed, ", "))
		}
	}
	return nil
}

// checkFinalized decides, for a node already running the toplevel, whether finalize
// must still run: "unchanged" needs the system profile and the default boot entry
// to name the toplevel too. A node whose earlier finalize failed (or whose profile or
// entry was moved) would otherwise boot another generation forever. The switch is
// still skipped: the running system is right.
func (r *run) checkFinalized(ctx context.Context, profile string) {
	boot, err := r.readBootEntry(ctx)
	switch {
	case err != nil:
		r.confirmed = true
		r.log("warn", "%s: snapshot: already running %s: not switching; %v: finalize sets the profile and boot entry again",
			r.d.Node, r.toplevel, err)
	case profile != r.toplevel || boot != r.toplevel:
		r.confirmed = true
		r.log("info", "%s: snapshot: already running %s: not switching; but the system profile is %s and the boot entry boots %s: finalize points them at it",
			r.d.Node, r.toplevel, orNone(profile), orNone(boot))
	default:
		r.bootSet = true
		r.log("info", "%s: snapshot: already running %s: not switching", r.d.Node, r.toplevel)
	}
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
