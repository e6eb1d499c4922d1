package effects

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// The confirmation over a fresh connection, and the node's own rollback (SPEC 4.6).
//
// A connection opened before the switch proves nothing about the new generation:
// sshd keeps established sessions across its own restart and a firewall keeps
// established connections. So, with DEPLOY_CONFIRM_TIMEOUT above 0, the switch's
// unit runs ConfirmSwitchScript, which records what happens under
// /run/switchyard/switch/<unit>/ and, once the activation took effect, waits for
// a marker the deployer writes over a new connection; without it the node puts
// itself back on the generation it ran before.

// recordBase holds one directory per switch unit: the node's record of it.
const recordBase = "/run/switchyard/switch"

// recordDir is the record of the switch run by unit.
func recordDir(unit string) string { return recordBase + "/" + unit }

// Record states, as ConfirmSwitchScript writes them to <dir>/state.
const (
	recActivating   = "activating"      // switch-to-configuration runs
	recWaiting      = "waiting"         // activated: waiting for the deployer's marker
	recConfirmed    = "confirmed"       // the marker came: the new generation stays
	recRollingBack  = "rolling-back"    // no marker in time, or the switch timed out
	recRolledBack   = "rolled-back"     // back on the previous generation
	recRollbackFail = "rollback-failed" // the way back failed: the node needs an operator
	recDone         = "done"            // nothing to confirm (no activation, or no previous generation)
)

// recordPrint prints what a record holds, one value each, as record.<name>= lines.
const recordPrint = `for f in state status reason rollback-status previous; do
	v=
	[ -f "$dir/$f" ] && IFS= read -r v <"$dir/$f"
	[ -n "$v" ] && printf 'record.%s=%s\n' "$f" "$v"
done
`

// ConfirmSwitchScript is the switch's unit with confirmation on: a fixed script, its
// inputs as arguments ($1 toplevel, $2 previous generation or "-", $3
// DEPLOY_SWITCH_TIMEOUT in seconds, $4 DEPLOY_CONFIRM_TIMEOUT in milliseconds, $5
// the record's directory, $6 switch-to-configuration's verb: switch, or test for
// apply --mode test, whose rollback also leaves the system profile alone). It bounds switch-to-configuration itself with
// timeout(1) (the unit's TimeoutStartSec= is only the backstop of the whole), and
// writes each file of the record atomically (a temporary file renamed over it), the
// state last, so a reader never sees half a value. The rollback is nixos-rebuild's
// --rollback: the system profile back on the previous generation, then its own
// switch-to-configuration switch (which installs its boot entry, as
// revert_bootloader does, and activates it). The script exits with
// switch-to-configuration's status; the deployer reads the record.
const ConfirmSwitchScript = `top=$1 prev=$2 bound=$3 wait=$4 dir=$5 action=${6:-switch}
umask 022
profile=/nix/var/nix/profiles/system
case $prev in /nix/store/*) [ "$prev" != "$top" ] || prev= ;; *) prev= ;; esac
mkdir -p "${dir%/*}" && mkdir "$dir" || exit 1
# Records of switches more than a week old go.
find "${dir%/*}" -mindepth 1 -maxdepth 1 -mtime +7 -exec rm -rf -- {} + 2>/dev/null
put() { printf '%s\n' "$2" >"$dir/.$1" && mv -f "$dir/.$1" "$dir/$1"; }
rollback() {
	put reason "$1"
	put state rolling-back
	ok=1
	if [ "$action" = switch ] && [ "$(readlink -f "$profile")" != "$prev" ]; then
		nix-env -p "$profile" --set "$prev" || ok=0
	fi
	timeout -k 90 "$bound" "$prev/bin/switch-to-configuration" "$action"
	rc=$?
	put rollback-status "$rc"
	case $rc in 0 | 4) ;; *) ok=0 ;; esac
	if [ "$ok" = 1 ]; then put state rolled-back; else put state rollback-failed; fi
	exit "$status"
}
put previous "$prev"
put state activating
timeout -k 90 "$bound" "$top/bin/switch-to-configuration" "$action" &
put pid "$!"
wait "$!"
status=$?
put status "$status"
case $status in
124 | 137)
	[ -n "$prev" ] && rollback "switch-to-configuration ran past DEPLOY_SWITCH_TIMEOUT (${bound}s)"
	;;
0 | 4)
	if [ -n "$prev" ] && [ "$wait" -gt 0 ] && [ "$(readlink -f /run/current-system)" = "$top" ]; then
		put state waiting
		waited=0
		while [ "$waited" -lt "$wait" ] && [ ! -e "$dir/confirm" ]; do
			sleep 0.25
			waited=$((waited + 250))
		done
		if [ -e "$dir/confirm" ]; then
			put state confirmed
			exit "$status"
		fi
		rollback "no confirmation over a fresh connection within DEPLOY_CONFIRM_TIMEOUT ($((wait / 1000))s)"
	fi
	;;
esac
put state done
exit "$status"
`

// ConfirmScript is the deployer's confirmation, run over the fresh connection and
// fenced by the node lock ($1 the record's directory, $2 "confirm"; "read" only
// prints): it writes the marker only while
// the node waits for it, then waits up to 10 s for the node to take it, and prints the
// record and where /run/current-system leads. The node alone decides: a marker that
// lands as the wait ends is ignored, and the record says the node rolls back.
const ConfirmScript = `dir=$1 mode=$2
state=
[ -f "$dir/state" ] && IFS= read -r state <"$dir/state"
if [ "$mode" = confirm ] && [ "$state" = waiting ]; then
	: >"$dir/confirm" || exit
	n=0
	while [ "$state" = waiting ] && [ "$n" -lt 40 ]; do
		sleep 0.25
		n=$((n + 1))
		IFS= read -r state <"$dir/state"
	done
fi
` + recordPrint + `printf 'current=%s\n' "$(readlink -f /run/current-system)"
`

// confirmArgv runs ConfirmScript for the switch unit's record: it confirms, or
// only reads the record.
func confirmArgv(unit string, confirm bool) []string {
	mode := "read"
	if confirm {
		mode = "confirm"
	}
	return []string{"sh", "-c", ConfirmScript, "sh", recordDir(unit), mode}
}

// rollbackDeadline is how long from now a node may take to decide and to switch
// itself back: its wait, a rollback's switch-to-configuration and its kill grace.
func (r *run) rollbackDeadline() time.Time {
	return time.Now().Add(r.cfg.ConfirmTimeout + r.cfg.SwitchTimeout + 90*time.Second + confirmMargin)
}

// confirmSwitchArgv starts the switch unit with ConfirmSwitchScript. Its
// TimeoutStartSec= is a backstop only: the switch, the wait, a rollback's switch and
// their kill grace. PATH holds the previous generation's tools before the new one's
// (nix-env, timeout, readlink on NixOS), after the node's own directories.
func confirmSwitchArgv(unit, toplevel, previous, action string, switchTimeout, confirmTimeout time.Duration, transportArgs []string) []string {
	backstop := 2*switchTimeout + confirmTimeout + switchStopGrace
	path := "/usr/sbin:/usr/bin:/sbin:/bin"
	if previous != "" {
		path += ":" + previous + "/sw/bin"
	}
	path += ":" + toplevel + "/sw/bin"
	argv := switchUnitArgv(unit, toplevel, transportArgs)
	argv = append(argv, "--property=TimeoutStartSec="+strconv.FormatInt(backstop.Milliseconds(), 10)+"ms",
		"--setenv=PATH="+path)
	if previous == "" {
		previous = "-" // systemd drops an empty argument of ExecStart=
	}
	// systemd expands $VAR in ExecStart=, a transient unit's too (systemd-run's
	// --expand-environment=, on by default and only since v254 able to be turned
	// off): "$$" is its literal "$". It expands no %-specifiers in a unit made over
	// D-Bus.
	script := strings.ReplaceAll(ConfirmSwitchScript, "$", "$$")
	return append(argv, "--", "/bin/sh", "-c", script, "sh", toplevel, previous,
		strconv.FormatFloat(switchTimeout.Seconds(), 'f', 3, 64),
		strconv.FormatInt(confirmTimeout.Milliseconds(), 10), recordDir(unit), action)
}

// nodeRecord is the node's record of a switch, as the scripts print it.
type nodeRecord struct {
	State          string
	Status         int // switch-to-configuration's exit status; -1: not recorded
	Reason         string
	RollbackStatus int
	Previous       string
}

// parseRecord reads the record.* lines of props; ok is false when the node had no
// record (confirmation off, or a unit of an older switchyard).
func parseRecord(props map[string]string) (rec nodeRecord, ok bool) {
	rec = nodeRecord{State: props["record.state"], Status: -1, RollbackStatus: -1, Reason: props["record.reason"]}
	if len(rec.Reason) > 200 { // a node's text: bounded before it is logged
		rec.Reason = rec.Reason[:200]
	}
	if n, err := strconv.Atoi(props["record.status"]); err == nil {
		rec.Status = n
	}
	if n, err := strconv.Atoi(props["record.rollback-status"]); err == nil {
		rec.RollbackStatus = n
	}
	if p := props["record.previous"]; isStorePath(p) {
		rec.Previous = p
	}
	return rec, rec.State != ""
}

// isStorePath: an absolute path in the Nix store, with nothing to read as options.
func isStorePath(p string) bool {
	return strings.HasPrefix(p, "/nix/store/") && !strings.ContainsAny(p, " \t\n")
}

// ended: the record says switch-to-configuration has ended (its status is
// recorded), whether or not the unit still waits for the confirmation.
func (rec nodeRecord) ended() bool { return rec.Status >= 0 }

// final: the node decided, and the unit is about to end.
func (rec nodeRecord) final() bool {
	switch rec.State {
	case recConfirmed, recRolledBack, recRollbackFail, recDone:
		return true
	}
	return false
}

// confirmMargin is how long past the node's wait and its rollback the deployer keeps
// trying to reach it (SPEC 4.6: until the timeout and the rollback have passed).
const confirmMargin = 30 * time.Second

// confirmFresh confirms the new generation over a fresh connection (SPEC 4.6): the
// transport drops the connection the switch ran on, and the fenced ConfirmScript runs
// on a new one. The verdict is judged over that connection. A node that cannot be
// reached is tried again until its wait and its rollback have passed; then it is
// unreachable (exit 3).
func (r *run) confirmFresh(ctx context.Context, rec nodeRecord) error {
	deadline := r.rollbackDeadline()
	if err := r.d.Transport.Fresh(ctx); err != nil && !errors.Is(err, ErrUnreachable) {
		return stopWith(exitcode.Infra, "opening a fresh connection: %w", err)
	}
	rec, current, err := r.readRecord(ctx, deadline, true)
	if err != nil {
		return err
	}
	r.current = current
	switch rec.State {
	case recConfirmed:
		r.confirmedOnNode(ctx)
		r.log("info", "%s: confirm: confirmed %s over a fresh connection", r.d.Node, r.toplevel)
		return nil
	case recRolledBack, recRollbackFail:
		return r.rolledBack(ctx, rec, current)
	}
	return stopWith(exitcode.Infra, "the node's record of %s says %q after the confirmation", r.switchUnit, rec.State)
}

// readRecord runs ConfirmScript (confirm: fenced, so it may write the marker) or
// only reads the record, until the node's decision is final or deadline passes.
// An unreachable node is tried again with a growing pause; at the deadline it is
// unreachable (exit 3).
func (r *run) readRecord(ctx context.Context, deadline time.Time, confirm bool) (nodeRecord, string, error) {
	return r.readRecordUntil(ctx, deadline, confirm, nodeRecord.final)
}

// decided: the node's script has written what it does after switch-to-configuration
// (wait for the confirmation, roll back, or nothing to confirm).
func (rec nodeRecord) decided() bool { return rec.State != recActivating }

// readRecordUntil is readRecord until the record satisfies until, not only until
// the node's decision is final.
func (r *run) readRecordUntil(ctx context.Context, deadline time.Time, confirm bool, until func(nodeRecord) bool) (nodeRecord, string, error) {
	backoff := 250 * time.Millisecond
	seen := ""
	for {
		var out string
		step := func(ctx context.Context) (err error) {
			out, err = r.execCheck(ctx, confirmArgv(r.switchUnit, confirm)...)
			return err
		}
		var err error
		if confirm {
			err = r.fencedStep(ctx, step)
		} else {
			err = step(ctx)
		}
		switch {
		case err == nil:
			props := parseProps(out)
			rec, _ := parseRecord(props)
			if until(rec) {
				return rec, props["current"], nil
			}
			if rec.State == "" {
				return rec, "", stopWith(exitcode.Infra, "confirm: the node has no record of %s", r.switchUnit)
			}
			seen = rec.State
		case errors.Is(err, ErrUnreachable):
		default:
			if lost := r.lockLost(ctx, err); lost != nil {
				return nodeRecord{}, "", stopWith(exitcode.Infra, "%w: the new generation was not confirmed and the node rolls back on its own", lost)
			}
			return nodeRecord{}, "", stopWith(exitcode.Infra, "confirm: %w", err)
		}
		if time.Now().After(deadline) {
			if errors.Is(err, ErrUnreachable) {
				r.v.Reachable = false
				return nodeRecord{}, "", stopWith(exitcode.Infra, "confirm: no fresh connection to the node since the switch (%v); it rolls back on its own after DEPLOY_CONFIRM_TIMEOUT (%s)",
					err, r.cfg.ConfirmTimeout)
			}
			return nodeRecord{}, "", stopWith(exitcode.Infra, "confirm: the node's record of %s still says %q", r.switchUnit, seen)
		}
		if err := sleep(ctx, backoff); err != nil {
			return nodeRecord{}, "", stopWith(exitcode.Infra, "%w", err)
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// confirmedOnNode: the node's record says confirmed; its unit has ended (or is about
// to) and is unloaded, and finalize makes the generation the boot default.
func (r *run) confirmedOnNode(ctx context.Context) {
	r.unloadSwitch(ctx, "")
	r.confirmed = true
}

// rolledBack reports a node that switched itself back (SPEC 4.6): switch.result
// rolled-back, exit 1, the node judged as it runs; a rollback that failed is exit 3.
func (r *run) rolledBack(ctx context.Context, rec nodeRecord, current string) error {
	r.unloadSwitch(ctx, "")
	newTop := r.toplevel
	r.v.Switch.Result = verdict.SwitchRolledBack
	if isStorePath(current) {
		r.running, r.toplevel = current, current
	}
	prev := rec.Previous
	if prev == "" {
		prev = r.previous
	}
	if rec.State == recRollbackFail {
		r.raise(exitcode.Infra, fmt.Sprintf("confirm: the node's rollback to %s failed (switch-to-configuration exited %d)", prev, rec.RollbackStatus))
		return failWith(exitcode.Verdict, "%s was not confirmed (%s) and the node's rollback to %q failed: it runs %q", newTop, rec.Reason, prev, current)
	}
	r.revertedTo = prev
	return failWith(exitcode.Verdict, "%s was rolled back by the node: %s; it runs the generation it ran before, %q, with the system profile and boot entry on it",
		newTop, rec.Reason, current)
}
