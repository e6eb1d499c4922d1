package effects

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/verdict"
)

// ownedArgv lists a toplevel's unit directory, two levels deep, following the
// symlinks NixOS builds it from: "<type> <relative path>" per entry.
func ownedArgv(toplevel string) []string {
	return []string{"find", "-L", toplevel + "/etc/systemd/system", "-mindepth", "1", "-maxdepth", "2", "-printf", `%y %P\n`}
}

// parseOwned reads ownedArgv's output: the units the configuration defines, and the
// units linked from its *.wants/ and *.requires/ directories.
func parseOwned(out string) (owned, wanted map[string]bool) {
	owned, wanted = map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		typ, rel, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || rel == "" {
			continue
		}
		dir, name, nested := strings.Cut(rel, "/")
		switch {
		case !nested && typ != "d":
			owned[dir] = true
		case nested && (strings.HasSuffix(dir, ".wants") || strings.HasSuffix(dir, ".requires")):
			wanted[name] = true
		}
	}
	return owned, wanted
}

// 9. owned units
func (r *run) listOwned(ctx context.Context) error {
	if r.toplevel == "" {
		r.owned, r.wanted = map[string]bool{}, map[string]bool{}
		return nil
	}
	out, code, err := r.exec(ctx, ownedArgv(r.toplevel)...)
	if err != nil {
		return stopWith(exitInfra, "listing the configuration's units: %w", err)
	}
	// find exits 1 when the directory is missing: a configuration without units.
	_ = code
	r.owned, r.wanted = parseOwned(out)
	return nil
}

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

// 11. settle
func (r *run) settle(ctx context.Context) error {
	for i := 0; i < r.cfg.SettleAttempts; i++ {
		s := r.sample(ctx)
		if s.Jobs != nil && len(s.Jobs) == 0 {
			return nil
		}
		if i+1 < r.cfg.SettleAttempts {
			if err := sleep(ctx, r.d.poll); err != nil {
				return stopWith(exitInfra, "%w", err)
			}
		}
	}
	return nil
}

// 12. cycle watch
func (r *run) cycleWatch(ctx context.Context) error {
	if len(r.samples) == 0 {
		r.sample(ctx)
	}
	r.cycleStart = len(r.samples) - 1
	for w := 0; w < r.cfg.CycleWindows; w++ {
		if err := sleep(ctx, r.cfg.CycleInterval); err != nil {
			return stopWith(exitInfra, "%w", err)
		}
		r.sample(ctx)
	}
	return nil
}

// minLoopSamples is the fewest samples a restart-loop share is judged on.
const minLoopSamples = 4

// 13. loop watch
func (r *run) loopWatch(ctx context.Context) error {
	for len(r.samples) < minLoopSamples {
		if err := sleep(ctx, r.d.poll); err != nil {
			return stopWith(exitInfra, "%w", err)
		}
		r.sample(ctx)
	}
	return nil
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
		LoopingShare: r.cfg.LoopingShare,
		SettleWindow: time.Duration(r.cfg.SettleAttempts) * r.d.poll,
	})
	return nil
}

// 15. verdict
func (r *run) judge(ctx context.Context) error {
	v := &r.v
	v.Units = r.classes
	v.PhasesMS = r.phasesMS
	switch {
	case r.confirmed:
		v.BootEntry = v.Toplevel
	case r.switched:
		v.BootEntry = r.running // reverted to the running generation
	default:
		v.BootEntry = r.bootEntry
	}
	exit, reasons := r.exit, append([]string(nil), r.reasons...)
	if len(r.samples) > 0 {
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
	v.OK = exit == exitOK
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
	if err := r.d.Transport.FinalizeBootloader(ctx, r.v.Toplevel); err != nil {
		return failWith(exitInfra, "setting the system profile and boot entry: %w", err)
	}
	return nil
}

// 18. conclude
func (r *run) conclude(ctx context.Context) error { return nil }

// 4. chain gate (verdict-only pass)
func (r *run) chainGate(ctx context.Context) error {
	out, code, err := r.exec(ctx, "cat", "--", "/run/current-system/etc/switchyard/chain")
	if err != nil {
		return stopWith(exitInfra, "reading the chain: %w", err)
	}
	members := parseChain(out)
	if code != 0 || len(members) == 0 {
		return nil // no chain declared
	}
	r.log("info", "%s: chain: waiting for %s", r.d.Node, strings.Join(members, " -> "))
	deadline := time.Now().Add(r.cfg.ChainTimeout)
	lastChange, unreachable := time.Now(), 0
	var prev []string
	for {
		s, err := r.read(ctx)
		switch {
		case err != nil || s.Units == nil:
			unreachable++
			if unreachable >= 3 {
				r.chainDown = true
				return stopWith(exitInfra, "node unreachable while waiting for the chain: %v", err)
			}
		default:
			unreachable = 0
			d := chainCompute(members, s.Units, prev)
			if d.changed {
				lastChange = time.Now()
			}
			prev = d.states
			switch {
			case d.up:
				return nil
			case d.failed != "":
				r.chainDown = true
				return failWith(exitVerdict, "chain member %s failed", d.failed)
			case time.Since(lastChange) >= r.cfg.ChainStall:
				r.chainDown = true
				return failWith(exitVerdict, "chain stalled at %s: no change for %s", d.waiting, r.cfg.ChainStall)
			case time.Now().After(deadline):
				r.chainDown = true
				return failWith(exitVerdict, "chain not up within %s: waiting for %s", r.cfg.ChainTimeout, d.waiting)
			}
		}
		if err := sleep(ctx, r.d.poll); err != nil {
			return stopWith(exitInfra, "%w", err)
		}
	}
}

func parseChain(s string) []string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// chainDecision is the chain gate's reading of one sample.
type chainDecision struct {
	up      bool     // every member active
	failed  string   // the head (first member not yet up) has failed
	waiting string   // the head
	states  []string // per member, to detect change
	changed bool
}

// chainCompute is the gate's pure decision from one sample and the previous states.
func chainCompute(members []string, units map[string]verdict.Unit, prev []string) chainDecision {
	d := chainDecision{up: true, states: make([]string, len(members))}
	for i, m := range members {
		u, ok := units[m]
		state := "absent"
		if ok {
			state = u.ActiveState + "/" + u.SubState + "/" + u.InvocationID
		}
		d.states[i] = state
		if prev != nil && prev[i] != state {
			d.changed = true
		}
		if d.up && (!ok || u.ActiveState != "active") {
			d.up = false
			d.waiting = m
			if ok && u.ActiveState == "failed" {
				d.failed = m
			}
		}
	}
	if prev == nil {
		d.changed = true
	}
	return d
}
