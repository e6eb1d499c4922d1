package effects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// Deploy is the deploy body for one node.
type Deploy struct {
	Node      string    // the node's name in every message
	Transport Transport // how the node is reached
	Source    Source    // where the toplevel comes from (not used by the verdict-only pass)
	Config    Config
	Reporter  Reporter
	// SkipUnchanged: a node already running the toplevel is not switched (switch
	// result "unchanged"); the verdict phases still judge it. apply sets it.
	SkipUnchanged bool
	// Journal keeps what this body starts on the node, for a rerun after the deployer
	// was killed (nil: none is kept).
	Journal Journal

	// Seams for the body's unit tests; zero values mean the real thing.
	resolve func(context.Context, Source) (string, error) // build phase
	poll    time.Duration                                 // pause between samples
}

// Result is what a finished body hands back.
type Result struct {
	Verdict  verdict.Verdict
	ExitCode int // the node's exit code (SPEC 2.1), which finalize may raise after the report
	// Journal is what this body found from the journal entry of a killed run and did
	// about it (the log line's text), "" when there was none.
	Journal string
	// Late is why ExitCode is above the verdict's: what failed after the report
	// (finalize), as the conclude log event names it. A caller whose operator sees
	// no log events (the provider's diagnostics) says it from here.
	Late []string
}

// pollInterval is the pause between two samples of the node.
const pollInterval = time.Second

// phase is one row of the phase table.
type phase struct {
	name string
	// when says in which pass the phase runs.
	when passes
	// always phases run even after an earlier phase stopped the node (the verdict
	// must still be reported and the exit code concluded).
	always bool
	// skip, when set, is asked before the phase starts: the phase has nothing to do
	// in this run (no sweep while the chain is down, no finalize without a switch).
	skip func(r *run) bool
	do   func(r *run, ctx context.Context) error
}

type passes int

const (
	bothPasses passes = iota
	deployOnly
	verdictOnly
)

// phases is SPEC 4.1, in its order. Names are the body's, never a transport's.
var phases = []phase{
	{"build", deployOnly, false, nil, (*run).build},
	{"wait", bothPasses, false, nil, (*run).wait},
	{"push", deployOnly, false, nil, (*run).push},
	{"chain", verdictOnly, false, nil, (*run).chainGate},
	{"snapshot", bothPasses, false, nil, (*run).snapshot},
	{"switch", deployOnly, false, func(r *run) bool { return r.unchanged || r.adopted }, (*run).doSwitch},
	{"switch-result", deployOnly, false, either(unchanged, booted), (*run).switchResult},
	{"confirm", deployOnly, false, either(unchanged, booted), (*run).confirm},
	{"owned", bothPasses, false, booted, (*run).listOwned},
	{"sweep", bothPasses, false, func(r *run) bool { return r.chainDown || r.booted }, (*run).sweep},
	{"settle", bothPasses, false, booted, (*run).settle},
	{"cycle-watch", bothPasses, false, booted, (*run).cycleWatch},
	{"loop-watch", bothPasses, false, booted, (*run).loopWatch},
	{"classify", bothPasses, true, func(r *run) bool { return len(r.samples) == 0 || r.booted }, (*run).classify},
	{"verdict", bothPasses, true, nil, (*run).judge},
	{"report", bothPasses, true, nil, (*run).report},
	{"finalize", deployOnly, true, func(r *run) bool { return !r.confirmed || !r.cfg.Mode.finalizes() }, (*run).finalize},
	{"reboot", deployOnly, false, func(r *run) bool { return !r.rebootWanted() }, (*run).reboot},
	{"conclude", bothPasses, true, nil, (*run).conclude},
}

func unchanged(r *run) bool { return r.unchanged }

// booted: apply --mode boot set the boot entry and activated nothing, so the node
// runs what it ran before and is not judged.
func booted(r *run) bool { return r.booted }

func either(a, b func(*run) bool) func(*run) bool {
	return func(r *run) bool { return a(r) || b(r) }
}

// PhaseNames lists the phases in order.
func PhaseNames() []string {
	out := make([]string, len(phases))
	for i, p := range phases {
		out[i] = p.name
	}
	return out
}

// phaseError is a phase failure with the node's exit code. A stopping one ends
// the node's work: the remaining phases are skipped except the always ones.
type phaseError struct {
	code int
	stop bool
	err  error
}

func (e *phaseError) Error() string { return e.err.Error() }
func (e *phaseError) Unwrap() error { return e.err }

// stopWith fails the phase and stops the node.
func stopWith(code int, format string, args ...any) error {
	return &phaseError{code: code, stop: true, err: fmt.Errorf(format, args...)}
}

// failWith fails the phase; the node goes on to its verdict.
func failWith(code int, format string, args ...any) error {
	return &phaseError{code: code, err: fmt.Errorf(format, args...)}
}

// Run runs the body on the node and returns its verdict and exit code.
func (d *Deploy) Run(ctx context.Context) Result {
	r := newRun(d)
	stopped := false
	for _, p := range phases {
		if !p.runsIn(r.verdictOnly()) || (stopped && !p.always) || (p.skip != nil && p.skip(r)) {
			d.Reporter.Phase(d.Node, p.name, PhaseSkipped, 0)
			continue
		}
		d.Reporter.Phase(d.Node, p.name, PhaseStart, 0)
		start := time.Now()
		err := p.do(r, ctx)
		elapsed := time.Since(start)
		r.phasesMS[p.name] = elapsed.Milliseconds()
		if err == nil {
			d.Reporter.Phase(d.Node, p.name, PhaseDone, elapsed)
			continue
		}
		d.Reporter.Phase(d.Node, p.name, PhaseFailed, elapsed)
		msg := fmt.Sprintf("%s: %s: %v", d.Node, p.name, err)
		d.Reporter.Log(d.Node, "error", msg)
		pe := &phaseError{code: exitcode.Infra, stop: true, err: err}
		errors.As(err, &pe)
		r.raise(pe.code, p.name+": "+err.Error())
		stopped = stopped || pe.stop
	}
	res := Result{Verdict: r.v, ExitCode: r.exit, Journal: r.journalNote}
	if r.exit > r.v.ExitCode {
		res.Late = r.lateReasons()
	}
	return res
}

func (p phase) runsIn(verdictOnlyPass bool) bool {
	switch p.when {
	case deployOnly:
		return !verdictOnlyPass
	case verdictOnly:
		return verdictOnlyPass
	}
	return true
}
