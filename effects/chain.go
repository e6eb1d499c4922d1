package effects

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// 4. chain gate (verdict-only pass)
func (r *run) chainGate(ctx context.Context) error {
	// Only a chain file that does not exist means "no chain": one that exists but
	// cannot be read must not let the sweep run before the secrets are up.
	const chainFile = "/run/current-system/etc/switchyard/chain"
	out, err := r.readOptional(ctx, chainFile, []string{"cat", "--", chainFile})
	if err != nil {
		r.v.Reachable = !errors.Is(err, ErrUnreachable)
		r.chainDown = true
		return stopWith(exitcode.Infra, "reading the chain: %w", err)
	}
	members := parseChain(out)
	r.chainMembers = members
	if len(members) == 0 {
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
				switch {
				case errors.Is(err, ErrUnreachable):
					r.v.Reachable = false
					return stopWith(exitcode.Infra, "node unreachable while waiting for the chain: %w", err)
				case err != nil:
					return stopWith(exitcode.Infra, "reading the node while waiting for the chain: %w", err)
				}
				// The node answered but systemd could not be read (a severed bus).
				return stopWith(exitcode.Infra, "systemd state not read while waiting for the chain: %s", strings.Join(s.Unread, "; "))
			}
		default:
			unreachable = 0
			d := chainCompute(members, s, prev)
			if d.changed {
				lastChange = time.Now()
			}
			prev = d.states
			switch {
			case d.up:
				return nil
			case d.failed != "":
				r.chainDown = true
				return failWith(exitcode.Verdict, "chain member %s failed", d.failed)
			case time.Since(lastChange) >= r.cfg.ChainStall:
				r.chainDown = true
				return failWith(exitcode.Verdict, "chain stalled at %s: no change for %s", d.waiting, r.cfg.ChainStall)
			case time.Now().After(deadline):
				r.chainDown = true
				return failWith(exitcode.Verdict, "chain not up within %s: waiting for %s", r.cfg.ChainTimeout, d.waiting)
			}
		}
		if err := sleep(ctx, r.d.poll); err != nil {
			return stopWith(exitcode.Infra, "%w", err)
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
	up      bool     // every member done
	failed  string   // the head (first member not yet done) has failed
	waiting string   // the head
	states  []string // per member, to detect change
	changed bool
}

// chainCompute is the gate's pure decision from one sample and the previous states.
func chainCompute(members []string, s verdict.Sample, prev []string) chainDecision {
	d := chainDecision{up: true, states: make([]string, len(members))}
	for i, m := range members {
		u, ok := s.Units[m]
		state := "absent"
		if ok {
			state = u.ActiveState + "/" + u.SubState + "/" + u.InvocationID
		}
		d.states[i] = state
		if prev != nil && prev[i] != state {
			d.changed = true
		}
		if d.up && !(ok && memberDone(u, s.Activated)) {
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

// memberDone: the member is active, or it is a oneshot without RemainAfterExit=
// (NixOS's default), which ends inactive once it succeeded, whose main process ran
// and exited successfully since the running generation was activated. A run before
// the activation did its work for an older generation, and a Condition*=-skipped
// start runs nothing, so neither counts.
func memberDone(u verdict.Unit, activated int64) bool {
	if u.ActiveState == "active" {
		return true
	}
	return u.Type == "oneshot" && !u.RemainAfterExit && u.ActiveState == "inactive" && u.Result == "success" &&
		activated != 0 && u.ExecMainStart >= activated && u.ExecMainExit >= u.ExecMainStart &&
		u.ExecMainCode == cldExited && u.ExecMainStatus == 0
}

// cldExited is CLD_EXITED: the main process exited (rather than being killed).
const cldExited = 1
