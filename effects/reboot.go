package effects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/localcmd"
	"github.com/switchyard-nix/switchyard/verdict"
)

// apply --reboot (issue 34 item 3, as colmena's and morph's): once the system profile
// and the default boot entry point at the new generation, the node reboots; the body
// waits for a new kernel boot id over a fresh connection, checks that the node booted
// the deployed generation (/run/booted-system), and gives the verdict of the booted
// system: a verdict-only pass, whose verdict becomes the node's.

const (
	// rebootCommandTimeout bounds `systemctl reboot`: it only queues the reboot, but
	// the shutdown may take the connection down before its status comes back.
	rebootCommandTimeout = 30 * time.Second
	// rebootAttempt bounds one try to reach the rebooting node (a fresh connection and
	// one read): a node that is down makes a dial hang until the TCP timeout.
	rebootAttempt = 15 * time.Second
	// smallAnswer bounds what the body keeps of a boot id or a store path the node
	// prints: a hostile node's answer is cut, and refused, past it.
	smallAnswer = 4096
)

// rebootWanted: --reboot was given and the node may reboot: its boot entry points at
// the new generation and nothing failed so far (a failed verdict is not rebooted, as
// colmena stops at a failed activation: the operator decides). A node that is not
// rebooted for a failure gets a log line saying so.
func (r *run) rebootWanted() bool {
	if !r.cfg.Reboot {
		return false
	}
	if r.bootSet && r.exit == exitcode.OK {
		return true
	}
	why := "its boot entry does not point at the new generation"
	if r.exit != exitcode.OK {
		why = fmt.Sprintf("it failed (exit %d)", r.exit)
	}
	r.log("warn", "%s: reboot: not rebooting: %s", r.d.Node, why)
	return false
}

// 18. reboot (apply --reboot)
func (r *run) reboot(ctx context.Context) error {
	deployed := r.v.Toplevel
	before, err := r.bootID(ctx)
	if err != nil {
		return stopWith(exitcode.Infra, "%w", err)
	}
	start := time.Now()
	if err := r.rebootNode(ctx); err != nil {
		return err
	}
	timeout := r.cfg.RebootTimeout
	if timeout <= 0 {
		timeout = DefaultRebootTimeout
	}
	after, err := r.waitNewBoot(ctx, before, start.Add(timeout), timeout)
	if err != nil {
		return err
	}
	booted, err := r.bootedSystem(ctx)
	if err != nil {
		return stopWith(exitcode.Infra, "%w", err)
	}
	r.log("info", "%s: reboot: back after %s (boot id %s, was %s), booted %s",
		r.d.Node, time.Since(start).Round(time.Second), after, before, orNone(booted))
	if booted != deployed {
		return stopWith(exitcode.Verdict, "the node came back on another generation: it booted %s, not the deployed %s",
			orNone(booted), deployed)
	}
	r.judgeBooted(ctx)
	return nil
}

// rebootNode runs `systemctl reboot` under the node lock. The lock lives in /run,
// which the reboot empties: its renewer stops first, and once the reboot is asked for
// the body holds no lock any more (conclude has nothing to release).
func (r *run) rebootNode(ctx context.Context) error {
	if l := r.lock; l != nil {
		l.stop()
		<-l.done
	}
	var errOut capped
	code := -1
	err := r.fencedStep(ctx, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, rebootCommandTimeout)
		defer cancel()
		var err error
		code, err = r.d.Transport.Run(cctx, Command{Argv: []string{"systemctl", "reboot"}, Stderr: &errOut, Path: r.swPath()})
		return err
	})
	switch {
	case errors.Is(err, ErrRefused):
		return stopWith(exitcode.Refused, "%w", err)
	case err != nil && ctx.Err() != nil:
		return stopWith(exitcode.Infra, "%w", ctx.Err())
	case err != nil:
		// The shutdown took the connection down under the command, as it may: the
		// new boot id tells whether the node rebooted.
		r.log("info", "%s: reboot: systemctl reboot: %v (the connection dropped; waiting for the node)", r.d.Node, err)
	case code != 0:
		stepErr := fmt.Errorf("systemctl reboot exited %d: %s", code, localcmd.LastLine(errOut.String()))
		if lost := r.lockLost(ctx, stepErr); lost != nil {
			return stopWith(exitcode.Infra, "%w: the node was not rebooted", lost)
		}
		return stopWith(exitcode.Infra, "%w", stepErr)
	}
	r.lock = nil
	return nil
}

// waitNewBoot reconnects until the node answers with a boot id other than before,
// each try on a fresh connection (one opened before the reboot proves nothing), up to
// deadline.
func (r *run) waitNewBoot(ctx context.Context, before string, deadline time.Time, timeout time.Duration) (string, error) {
	var lastErr error
	for {
		actx, cancel := context.WithTimeout(ctx, min(max(time.Until(deadline), time.Second), rebootAttempt))
		err := r.d.Transport.Fresh(actx)
		var id string
		if err == nil {
			id, err = r.bootID(actx)
		}
		cancel()
		switch {
		case err == nil && id != before:
			return id, nil
		case errors.Is(err, ErrRefused):
			// A host key that changed across the reboot: not the node deployed to.
			return "", stopWith(exitcode.Refused, "after the reboot: %w", err)
		case ctx.Err() != nil:
			return "", stopWith(exitcode.Infra, "%w", ctx.Err())
		case err != nil:
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr == nil {
				return "", stopWith(exitcode.Infra, "the node did not reboot within %s: its boot id is still %s", timeout, before)
			}
			return "", stopWith(exitcode.Infra, "the node did not come back within %s: %v", timeout, lastErr)
		}
		if err := sleep(ctx, min(r.d.poll, max(time.Until(deadline), 0))); err != nil {
			return "", stopWith(exitcode.Infra, "%w", err)
		}
	}
}

// bootID is the node's kernel boot id, which every boot draws anew.
func (r *run) bootID(ctx context.Context) (string, error) {
	id, code, err := r.small(ctx, "cat", "/proc/sys/kernel/random/boot_id")
	switch {
	case err != nil:
		return "", fmt.Errorf("reading the boot id: %w", err)
	case code != 0 || id == "" || strings.ContainsAny(id, " \t\n"):
		return "", fmt.Errorf("reading the boot id: cat exited %d with %q", code, id)
	}
	return id, nil
}

// bootedSystem is what /run/booted-system resolves to: the generation the node booted
// (NixOS's stage 2 sets it); "" when it is missing.
func (r *run) bootedSystem(ctx context.Context) (string, error) {
	out, code, err := r.small(ctx, "readlink", "-e", "/run/booted-system")
	if err != nil {
		return "", fmt.Errorf("reading /run/booted-system: %w", err)
	}
	if code != 0 {
		return "", nil
	}
	if !isStorePath(out) {
		return "", fmt.Errorf("reading /run/booted-system: %q is not a store path", out)
	}
	return out, nil
}

// small runs argv and returns its trimmed stdout, which must fit smallAnswer.
func (r *run) small(ctx context.Context, argv ...string) (string, int, error) {
	var out capped
	code, err := r.d.Transport.Run(ctx, Command{Argv: argv, Stdout: &out, Path: r.swPath()})
	if err == nil && out.over {
		err = fmt.Errorf("%s: the answer exceeds %d bytes", argv[0], smallAnswer)
	}
	return strings.TrimSpace(out.String()), code, err
}

// judgeBooted runs the verdict-only pass on the booted system (its phases reported
// inside this one) and makes its verdict the node's, with the deploy's previous.
func (r *run) judgeBooted(ctx context.Context) {
	// The pass reads the booted generation as the one running before it; the
	// generation before the deploy is still the one to roll back to (the previous of
	// the verdict event, the state and the receipt).
	previous := r.v.Previous
	pass := *r.d
	pass.Config.VerdictOnly, pass.Config.Reboot = true, false
	pass.Journal, pass.SkipUnchanged = nil, false
	pass.Reporter = withPrevious{r.d.Reporter, previous}
	res := runPass(&pass, ctx)
	r.v = res.Verdict
	r.v.Previous = previous
	r.raise(res.ExitCode, "")
	r.reasons = append(r.reasons, res.Verdict.Reasons...)
}

// withPrevious reports verdicts with the generation the node ran before the deploy.
type withPrevious struct {
	Reporter
	previous string
}

func (w withPrevious) Verdict(v verdict.Verdict) {
	v.Previous = w.previous
	w.Reporter.Verdict(v)
}

// runPass is Deploy.Run, set at init: the phase table names reboot, which runs the
// table again, and Go refuses that cycle in a variable's initializer.
var runPass func(*Deploy, context.Context) Result

func init() { runPass = (*Deploy).Run }

// capped keeps the first smallAnswer bytes written to it and notes that more came.
type capped struct {
	strings.Builder
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := smallAnswer - c.Len(); len(p) > room {
		c.over = true
		c.Builder.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.Builder.Write(p)
}
