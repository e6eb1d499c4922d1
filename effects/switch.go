package effects

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// switchArgv starts switch-to-configuration as a transient unit, so a dropped
// connection does not kill it and its exit status can be read after a reconnect.
// RemainAfterExit keeps the unit (and its status) loaded until switchyard reads it.
func switchArgv(unit, toplevel string, runtimeArgs []string) []string {
	argv := []string{"systemd-run", "--unit=" + unit, "--description=switchyard: switch to " + toplevel,
		"--service-type=oneshot", "--property=RemainAfterExit=yes", "--no-block", "--quiet"}
	argv = append(argv, runtimeArgs...)
	return append(argv, "--", toplevel+"/bin/switch-to-configuration", "switch")
}

// switchStatusArgv reads the transient unit's state and main process status.
func switchStatusArgv(unit string) []string {
	return []string{"systemctl", "show", "--property=LoadState,ActiveState,Result,ExecMainCode,ExecMainStatus", "--", unit}
}

// switchOutcome maps switch-to-configuration's exit status (SPEC 4.1 #7).
func switchOutcome(code int) string {
	switch code {
	case 0:
		return "ok"
	case 4:
		return "units-failed"
	case 100:
		return "reboot-needed"
	}
	return "error"
}

const (
	// switchLimit bounds how long the body waits for the switch to finish.
	switchLimit = 30 * time.Minute
	// reconnectLimit bounds how long the node may stay unreachable while the switch runs.
	reconnectLimit = 2 * time.Minute
)

// 6. switch
func (r *run) doSwitch(ctx context.Context) error {
	r.switchUnit = fmt.Sprintf("switchyard-switch-%d", time.Now().UnixNano())
	out, err := r.execCheck(ctx, switchArgv(r.switchUnit, r.toplevel, r.d.Transport.SwitchRuntimeMaxArgs())...)
	if err != nil && !errors.Is(err, ErrUnreachable) {
		return stopWith(exitInfra, "starting the switch: %w", err)
	}
	if err != nil {
		// The unit may have started before the connection dropped: the result
		// phase finds out.
		r.log("warn", "%s: switch: %v (will read the result after reconnecting)", r.d.Node, err)
	}
	_ = out
	return nil
}

// 7. read the switch result
func (r *run) switchResult(ctx context.Context) error {
	deadline := time.Now().Add(switchLimit)
	lastSeen := time.Now()
	backoff := 250 * time.Millisecond
	for {
		out, err := r.execCheck(ctx, switchStatusArgv(r.switchUnit)...)
		if err == nil {
			lastSeen = time.Now()
			backoff = 250 * time.Millisecond
			props := parseProps(out)
			switch {
			case props["LoadState"] == "not-found":
				return stopWith(exitInfra, "the switch unit %s never started", r.switchUnit)
			case props["ActiveState"] == "active" || props["ActiveState"] == "failed" ||
				(props["ActiveState"] == "inactive" && props["ExecMainCode"] != "0"):
				return r.recordSwitch(ctx, props)
			}
		} else if !errors.Is(err, ErrUnreachable) {
			return stopWith(exitInfra, "reading the switch result: %w", err)
		} else if time.Since(lastSeen) > reconnectLimit {
			return stopWith(exitInfra, "node unreachable for %s during the switch: %w", reconnectLimit, err)
		} else {
			backoff = min(backoff*2, 5*time.Second)
		}
		if time.Now().After(deadline) {
			return stopWith(exitInfra, "the switch did not finish within %s", switchLimit)
		}
		if err := sleep(ctx, backoff); err != nil {
			return stopWith(exitInfra, "%w", err)
		}
	}
}

func (r *run) recordSwitch(ctx context.Context, props map[string]string) error {
	r.switched = true
	code := -1
	if props["ExecMainCode"] == "1" { // CLD_EXITED: ExecMainStatus is the exit status
		code, _ = strconv.Atoi(props["ExecMainStatus"])
	}
	r.v.Switch.ExitCode = code
	r.v.Switch.Result = switchOutcome(code)
	if code == -1 {
		r.log("error", "%s: switch: switch-to-configuration did not exit (result %s, signal %s)",
			r.d.Node, props["Result"], props["ExecMainStatus"])
	}
	if code != 0 {
		// Show the operator what activation said.
		if out, err := r.execCheck(ctx, "journalctl", "--unit", r.switchUnit, "--output", "cat", "--lines", "20", "--no-pager"); err == nil {
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if line != "" {
					r.log("info", "%s: switch: %s", r.d.Node, line)
				}
			}
		}
	}
	// The unit stays loaded for us (RemainAfterExit); unload it now.
	_, _, _ = r.exec(ctx, "systemctl", "stop", "--", r.switchUnit)
	_, _, _ = r.exec(ctx, "systemctl", "reset-failed", "--", r.switchUnit)
	return nil
}

// 8. never-confirmed check
func (r *run) confirm(ctx context.Context) error {
	out, err := r.execCheck(ctx, "readlink", "-f", "/run/current-system")
	if err != nil {
		return stopWith(exitInfra, "reading /run/current-system: %w", err)
	}
	cur := strings.TrimSpace(out)
	if cur == r.toplevel {
		r.confirmed = true
		return nil
	}
	r.running = cur
	r.v.Switch.Result = "never-confirmed"
	if err := r.d.Transport.RevertBootloader(ctx); err != nil {
		r.raise(exitInfra, "confirm: reverting the boot entry: "+err.Error())
		r.log("error", "%s: confirm: reverting the boot entry: %v", r.d.Node, err)
	}
	// Judge the node as it runs.
	r.toplevel = cur
	return failWith(exitVerdict, "the switch never activated: /run/current-system is %q, not the new toplevel; boot entry reverted to the running generation", cur)
}

// parseProps reads systemctl show's KEY=VALUE lines.
func parseProps(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}
