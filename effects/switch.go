package effects

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// switchArgv starts switch-to-configuration as a transient unit, so a dropped
// connection does not kill it and its exit status can be read after a reconnect.
// RemainAfterExit keeps the unit (and its status) loaded until switchyard reads it.
//
// The unit is bounded by TimeoutStartSec=: systemd.service(5) gives RuntimeMaxSec=
// no effect on Type=oneshot, and a oneshot's start has no timeout by default, so
// only TimeoutStartSec= stops a hung activation (the unit then fails with
// Result=timeout and its processes are killed). It comes after the transport's own
// arguments, so DEPLOY_SWITCH_TIMEOUT is the bound whatever they say.
func switchArgv(unit, toplevel, action string, timeout time.Duration, transportArgs []string) []string {
	argv := switchUnitArgv(unit, toplevel, transportArgs)
	argv = append(argv, "--property=TimeoutStartSec="+strconv.FormatInt(timeout.Milliseconds(), 10)+"ms")
	return append(argv, "--", toplevel+"/bin/switch-to-configuration", action)
}

// switchUnitArgv is systemd-run's start of the switch's transient unit, the
// transport's own arguments last.
func switchUnitArgv(unit, toplevel string, transportArgs []string) []string {
	argv := []string{"systemd-run", "--unit=" + unit, "--description=switchyard: switch to " + toplevel,
		"--service-type=oneshot", "--property=RemainAfterExit=yes", "--no-block", "--quiet"}
	return append(argv, transportArgs...)
}

// switchStatusArgv reads the transient unit's state and main process status.
func switchStatusArgv(unit string) []string {
	return []string{"systemctl", "show", "--property=" + switchProps, "--", unit}
}

const switchProps = "LoadState,ActiveState,Result,ExecMainCode,ExecMainStatus"

// SwitchWaitScript waits on the node, for at most $2 milliseconds, until the switch
// unit $1 has ended, and prints its properties (those switchStatusArgv reads, and
// MainPID) and the node's record of it ($3, ConfirmSwitchScript's directory, as
// record.<name>= lines); once it has ended, also "current=<where
// /run/current-system leads>". So reading the result and confirm's readlink cost
// the node one SSH session and a few processes however long the activation runs, not
// an SSH session and a systemctl per poll plus one for the readlink. It waits for
// switch-to-configuration's process with GNU tail --pid (coreutils, as timeout), and
// polls every 250 ms only while there is no such process to wait for.
//
// The unit has ended as switchResult judges it: active (a oneshot with
// RemainAfterExit whose process exited 0), failed, or inactive with a main process
// that ran (ExecMainCode not 0); not-found is printed without waiting. With a record
// the unit outlives switch-to-configuration (it waits for the confirmation, SPEC
// 4.6): the recorded exit status ends the wait, and the pid to wait for is the
// record's. A systemctl that fails ends the script with its status and its stderr.
// It only reads: when the connection drops before its answer arrives (an activation
// that restarts sshd or the network), the body runs it again and reads the same; the
// unit is unloaded only once the body has its result.
const SwitchWaitScript = `unit=$1 bound=$2 dir=$3 waited=0
show() {
	printf '%s\n' "$props"
	` + recordPrint + `}
while :; do
	props=$(systemctl show --property=` + switchProps + `,MainPID -- "$unit") || exit
	load= active= code= pid=0
	while IFS== read -r key value; do
		case $key in
		LoadState) load=$value ;;
		ActiveState) active=$value ;;
		ExecMainCode) code=$value ;;
		MainPID) pid=$value ;;
		esac
	done <<EOF
$props
EOF
	case $load/$active/$code in
	not-found/*) show; exit 0 ;;
	*/active/* | */failed/*) break ;;
	*/inactive/0) ;;
	*/inactive/*) break ;;
	esac
	[ -f "$dir/status" ] && break
	if [ "$waited" -ge "$bound" ]; then show; exit 0; fi
	if [ -d "$dir" ]; then
		# The unit's main process is the script, which outlives the switch.
		pid=0
		[ -f "$dir/pid" ] && IFS= read -r pid <"$dir/pid"
	fi
	if [ "$pid" -gt 0 ] 2>/dev/null; then
		# Sleep until switch-to-configuration exits: tail checks the pid four times a
		# second, with no process started per check.
		timeout "$(((bound - waited + 999) / 1000))" tail --pid="$pid" -s 0.25 -f /dev/null 2>/dev/null
		case $? in
		0) waited=$((waited + 10)); continue ;;
		124) waited=$bound; continue ;;
		esac
	fi
	sleep 0.25
	waited=$((waited + 250))
done
show
printf 'current=%s\n' "$(readlink -f /run/current-system)"
`

// switchWaitArgv waits up to bound on the node for the switch unit to end
// (SwitchWaitScript).
func switchWaitArgv(unit string, bound time.Duration) []string {
	return []string{"sh", "-c", SwitchWaitScript, "sh", unit, strconv.FormatInt(max(bound.Milliseconds(), 0), 10), recordDir(unit)}
}

// switchWaitSlice bounds one wait on the node: the body looks at its own deadline
// (and its context) between two.
const switchWaitSlice = 20 * time.Second

// switchOutcome maps switch-to-configuration's exit status (SPEC 4.1 #7).
func switchOutcome(code int) verdict.SwitchResult {
	switch code {
	case 0:
		return verdict.SwitchOK
	case 4:
		return verdict.SwitchUnitsFailed
	case 100:
		return verdict.SwitchRebootNeeded
	}
	return verdict.SwitchError
}

const (
	// switchStopGrace is how long past DEPLOY_SWITCH_TIMEOUT the body waits for
	// systemd to stop the unit (SIGTERM, then SIGKILL after TimeoutStopSec=, 90 s by
	// default) before it stops the unit itself.
	switchStopGrace = 3 * time.Minute
	// reconnectLimit bounds how long the node may stay unreachable while the switch
	// runs and right after it (the activation may restart sshd or the network).
	reconnectLimit = 2 * time.Minute
)

// 6. switch
func (r *run) doSwitch(ctx context.Context) error {
	if r.cfg.Mode == ModeBoot {
		return r.bootOnly(ctx)
	}
	r.switchUnit = fmt.Sprintf("switchyard-switch-%d", time.Now().UnixNano())
	// From here on the switch may run: until its result is read it is an error,
	// never "skipped" (that is the verdict-only pass). -1: no exit status read.
	r.v.Switch.Result, r.v.Switch.ExitCode = verdict.SwitchError, -1
	// Journaled before systemd-run: a deployer killed from here on leaves the unit's
	// name, and the rerun looks that unit up rather than starting a second switch.
	r.journalRecord(JournalSwitch)
	err := r.fencedStep(ctx, func(ctx context.Context) error {
		_, err := r.execCheck(ctx, r.switchCommand()...)
		return err
	})
	if err != nil && !errors.Is(err, ErrUnreachable) {
		if lost := r.lockLost(ctx, err); lost != nil {
			return stopWith(exitcode.Infra, "%w: the switch was not started, nothing changed", lost)
		}
		return stopWith(exitcode.Infra, "starting the switch: %w", err)
	}
	if err != nil {
		// The unit may have started before the connection dropped: the result
		// phase finds out.
		r.log("warn", "%s: switch: %v (will read the result after reconnecting)", r.d.Node, err)
		return nil
	}
	r.switchStarted = true
	return nil
}

// bootOnly is the switch of apply --mode boot: the system profile and the default
// boot entry point at the new generation (what finalize does after a switch), and
// nothing is activated: the node runs it after its next boot.
func (r *run) bootOnly(ctx context.Context) error {
	r.journalRecord(JournalFinalize)
	if err := r.pointBootAt(ctx, r.toplevel); err != nil {
		return stopWith(exitcode.Infra, "%w", err)
	}
	r.v.Switch.Result, r.v.Switch.ExitCode = verdict.SwitchBoot, 0
	r.booted, r.bootSet = true, true
	r.log("info", "%s: switch: the system profile and the boot entry point at %s; the node runs it after its next boot (--mode boot)", r.d.Node, r.toplevel)
	return nil
}

// switchCommand starts the switch's unit: switch-to-configuration alone with
// DEPLOY_CONFIRM_TIMEOUT=0, else under ConfirmSwitchScript (SPEC 4.6).
func (r *run) switchCommand() []string {
	extra := r.d.Transport.SwitchRuntimeMaxArgs()
	if r.cfg.ConfirmTimeout <= 0 {
		return switchArgv(r.switchUnit, r.toplevel, r.cfg.Mode.action(), r.cfg.SwitchTimeout, extra)
	}
	prev := r.previous
	if !isStorePath(prev) || prev == r.toplevel {
		prev = "" // nothing the node could go back to
	}
	return confirmSwitchArgv(r.switchUnit, r.toplevel, prev, r.cfg.Mode.action(), r.cfg.SwitchTimeout, r.cfg.ConfirmTimeout, extra)
}

// 7. read the switch result
func (r *run) switchResult(ctx context.Context) error {
	deadline := time.Now().Add(r.cfg.SwitchTimeout + switchStopGrace)
	if r.switchStarted {
		// This body started it a moment ago: no activation is over that soon, and a
		// read that can only say "activating" costs the node a systemctl.
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return stopWith(exitcode.Infra, "%w", err)
		}
	}
	for {
		bound := min(time.Until(deadline), switchWaitSlice)
		out, err := r.untilReachable(ctx, "reading the switch result", switchWaitArgv(r.switchUnit, bound))
		if err != nil {
			return stopWith(exitcode.Infra, "%w", err)
		}
		props := parseProps(out)
		rec, hasRecord := parseRecord(props)
		switch {
		case hasRecord && rec.ended():
			// switch-to-configuration ended; the unit may still wait for the
			// confirmation (SPEC 4.6).
			r.current, r.record = props["current"], &rec
			return r.recordSwitch(ctx, props)
		case props["LoadState"] == "not-found" && r.switchStarted:
			return stopWith(exitcode.Infra, "the switch unit %s is gone before its result was read", r.switchUnit)
		case props["LoadState"] == "not-found":
			return stopWith(exitcode.Infra, "the switch unit %s never started", r.switchUnit)
		case props["ActiveState"] == "active" || props["ActiveState"] == "failed" ||
			(props["ActiveState"] == "inactive" && props["ExecMainCode"] != "0"):
			// The node read /run/current-system once the switch had ended.
			r.current = props["current"]
			return r.recordSwitch(ctx, props)
		}
		if time.Now().After(deadline) {
			// systemd did not stop it at the bound: stop it here, so no switch is
			// left running behind the verdict.
			r.log("error", "%s: switch: still running %s after DEPLOY_SWITCH_TIMEOUT (%s): stopping it",
				r.d.Node, switchStopGrace, r.cfg.SwitchTimeout)
			_, _, _ = r.exec(ctx, "systemctl", "kill", "--signal=SIGKILL", "--", r.switchUnit)
			r.unloadSwitch(ctx, "")
			r.switched, r.switchTimedOut = true, true
			return nil
		}
	}
}

// untilReachable runs argv, retrying while the node is unreachable (a switch may
// restart sshd or the network under the connection), for up to reconnectLimit of
// unreachability, with a growing pause.
func (r *run) untilReachable(ctx context.Context, what string, argv []string) (string, error) {
	var out string
	err := retryUnreachable(ctx, func() (err error) {
		out, err = r.execCheck(ctx, argv...)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// retryUnreachable runs read, which only reads the node, again while the node is
// unreachable, for up to reconnectLimit of unreachability, with a growing pause.
// The phases right after the switch read through it: the activation may restart
// sshd or the network under the connection, then or a moment later.
func retryUnreachable(ctx context.Context, read func() error) error {
	lastSeen := time.Now()
	backoff := 250 * time.Millisecond
	for {
		err := read()
		switch {
		case err == nil || !errors.Is(err, ErrUnreachable):
			return err
		case time.Since(lastSeen) > reconnectLimit:
			return fmt.Errorf("node unreachable for %s: %w", reconnectLimit, err)
		}
		if err := sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (r *run) recordSwitch(ctx context.Context, props map[string]string) error {
	r.switched = true
	code := -1
	if props["ExecMainCode"] == "1" { // CLD_EXITED: ExecMainStatus is the exit status
		code, _ = strconv.Atoi(props["ExecMainStatus"])
	}
	if r.record != nil {
		code = r.record.Status // the script's unit may still run: its record tells
	}
	r.v.Switch.ExitCode = code
	r.v.Switch.Result = switchOutcome(code)
	switch {
	case r.record != nil && (code == 124 || code == 137):
		r.switchTimedOut = true
		r.log("error", "%s: switch: switch-to-configuration ran past DEPLOY_SWITCH_TIMEOUT (%s): the node stopped it",
			r.d.Node, r.cfg.SwitchTimeout)
	case props["Result"] == "timeout":
		r.switchTimedOut = true
		r.log("error", "%s: switch: switch-to-configuration ran past DEPLOY_SWITCH_TIMEOUT (%s): systemd stopped it",
			r.d.Node, r.cfg.SwitchTimeout)
	case code == -1:
		r.log("error", "%s: switch: switch-to-configuration did not exit (result %s, signal %s)",
			r.d.Node, props["Result"], props["ExecMainStatus"])
	}
	r.readSwitchLog(ctx, code != 0)
	if r.record != nil && !r.record.final() {
		return nil // the unit waits for the confirmation, or rolls back: confirm unloads it
	}
	r.unloadSwitch(ctx, props["ActiveState"])
	return nil
}

// switchLogLines is how many of the switch's last lines a failed switch shows.
const switchLogLines = 20

// readSwitchLog reads what switch-to-configuration said (its unit's journal) for the
// verdict: ng names the changed units it did not restart, and the ones it stopped
// and started. A failed switch's last lines are shown to the operator too. A journal
// that cannot be read leaves the log empty: the verdict then judges by systemd's
// state alone, and says so in a warning.
func (r *run) readSwitchLog(ctx context.Context, failed bool) {
	out, err := r.execCheck(ctx, verdict.SwitchLogArgv(r.switchUnit)...)
	if err != nil {
		r.log("warn", "%s: switch: reading switch-to-configuration's messages: %v", r.d.Node, err)
		return
	}
	r.switchLog = verdict.ParseSwitchLog(out)
	if !failed {
		return
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, line := range lines[max(len(lines)-switchLogLines, 0):] {
		if line != "" {
			r.log("info", "%s: switch: %s", r.d.Node, line)
		}
	}
}

// unloadSwitch removes the transient unit: it stays loaded for us (RemainAfterExit,
// or failed) until stopped and reset. systemd unloads a transient unit once it is
// inactive and not failed, so an active one (the switch exited 0) needs only the
// stop and a failed one only the reset; a unit in any other state (active is "" when
// it is not known) gets both.
func (r *run) unloadSwitch(ctx context.Context, active string) {
	if active != "failed" {
		_, _, _ = r.exec(ctx, "systemctl", "stop", "--", r.switchUnit)
	}
	if active != "active" {
		_, _, _ = r.exec(ctx, "systemctl", "reset-failed", "--", r.switchUnit)
	}
}

// 8. never-confirmed check
func (r *run) confirm(ctx context.Context) error {
	if r.switchTimedOut {
		return r.timedOut(ctx)
	}
	if rec := r.record; rec != nil {
		if !rec.decided() {
			// switch-to-configuration's status is recorded but the node's script has
			// not yet written what comes next (on a loaded node that takes a while):
			// read until it has. Going on from "activating" would skip the
			// confirmation over a fresh connection and stop the unit waiting for it.
			next, current, err := r.readRecordUntil(ctx, r.rollbackDeadline(), false, nodeRecord.decided)
			if err != nil {
				return err
			}
			rec, r.record = &next, &next
			if current != "" {
				r.current = current
			}
		}
		switch rec.State {
		case recWaiting, recConfirmed:
			// A test-only seam: the journal test kills the deployer here, between
			// the switch and its confirmation.
			testPause(ctx, "SWITCHYARD_TEST_PAUSE_BEFORE_CONFIRM")
			return r.confirmFresh(ctx, *rec)
		case recRollingBack, recRolledBack, recRollbackFail:
			// Read after the node's own decision (a rerun, or a deployer that came
			// back late): report what the node did.
			final, current, err := r.readRecord(ctx, r.rollbackDeadline(), false)
			if err != nil {
				return err
			}
			if final.State == recConfirmed {
				r.confirmedOnNode(ctx)
				return nil
			}
			return r.rolledBack(ctx, final, current)
		}
		r.unloadSwitch(ctx, "")
	}
	cur := r.current
	if cur == "" {
		var err error
		if cur, err = r.readCurrent(ctx); err != nil {
			return stopWith(exitcode.Infra, "%w", err)
		}
	}
	if cur == r.toplevel {
		r.confirmed = true
		return nil
	}
	r.running = cur
	newTop := r.toplevel
	// Judge the node as it runs.
	r.toplevel = cur
	switch r.v.Switch.Result {
	case verdict.SwitchRebootNeeded:
		// switch-to-configuration installed the new boot entry and did not activate
		// (the init's interface changed): the node runs the new generation once it
		// reboots. Finalize sets the profile and keeps that entry.
		r.confirmed = true
		r.log("warn", "%s: confirm: the node must reboot to run %s (switch-to-configuration exit 100: its init is incompatible with the running one); it runs %s until then",
			r.d.Node, newTop, cur)
		return nil
	case verdict.SwitchError:
		r.revertBoot(ctx)
		return failWith(exitcode.Verdict, "the switch failed and the node still runs %q; boot entry reverted to it", cur)
	}
	r.v.Switch.Result = verdict.SwitchNeverConfirmed
	r.revertBoot(ctx)
	return failWith(exitcode.Verdict, "the switch never activated: /run/current-system is %q, not the new toplevel; boot entry reverted to the running generation", cur)
}

// readCurrent is what /run/current-system resolves to, read through a reconnect.
func (r *run) readCurrent(ctx context.Context) (string, error) {
	out, err := r.untilReachable(ctx, "reading /run/current-system", []string{"readlink", "-f", "/run/current-system"})
	return strings.TrimSpace(out), err
}

// timedOut is confirm for a switch stopped at DEPLOY_SWITCH_TIMEOUT: an error,
// and the system profile and boot entry go back to the generation the node ran
// before (SPEC 4.3). NixOS's switch-to-configuration repoints /run/current-system
// before it starts units, so a hung start job leaves the link on the new
// generation: the link proves nothing here, and finalize never runs.
func (r *run) timedOut(ctx context.Context) error {
	r.v.Switch.Result = verdict.SwitchError
	if rec := r.record; rec != nil && rec.State != recDone {
		// The node switches itself back when it has a previous generation
		// (ConfirmSwitchScript): wait for its decision, then report where it is. A
		// record still "activating" holds the status but not yet the script's next
		// step (its switch back, or "done"): read on, or the body would put the
		// profile and boot entry back beside the node's own switch back and leave
		// the unit behind.
		final, current, err := r.readRecord(ctx, r.rollbackDeadline(), false)
		if err != nil {
			return err
		}
		r.unloadSwitch(ctx, "")
		if final.State == recRolledBack && isStorePath(current) {
			r.running, r.toplevel, r.revertedTo = current, current, final.Previous
			return failWith(exitcode.Verdict, "the switch was stopped at DEPLOY_SWITCH_TIMEOUT (%s); the node switched itself back to the generation it ran before, %q, with the system profile and boot entry on it",
				r.cfg.SwitchTimeout, current)
		}
		if final.State != recDone {
			r.log("error", "%s: confirm: the node's own switch back to %s did not complete (%s, switch-to-configuration exited %d): putting the system profile and boot entry back",
				r.d.Node, final.Previous, final.State, final.RollbackStatus)
		}
	}
	if cur, err := r.readCurrent(ctx); err == nil {
		r.running = cur
		r.toplevel = cur // judge the node as it runs
	}
	if r.previous == "" {
		r.revertBoot(ctx)
		return failWith(exitcode.Verdict, "the switch was stopped at DEPLOY_SWITCH_TIMEOUT (%s); boot entry reverted to the running generation", r.cfg.SwitchTimeout)
	}
	back := func(ctx context.Context) error { return r.d.Transport.FinalizeBootloader(ctx, r.previous) }
	if r.putBack(ctx, "putting the system profile and boot entry back", back) {
		r.revertedTo = r.previous
	}
	return failWith(exitcode.Verdict, "the switch was stopped at DEPLOY_SWITCH_TIMEOUT (%s) with /run/current-system at %q; system profile and boot entry back on the generation the node ran before, %q",
		r.cfg.SwitchTimeout, r.running, r.previous)
}

// revertBoot points the boot entry back at the running generation; a failure
// raises the node to exit 3.
func (r *run) revertBoot(ctx context.Context) {
	r.putBack(ctx, "reverting the boot entry", r.d.Transport.RevertBootloader)
}

// putBack runs a fenced step that puts the boot entry (and profile) back, journaled
// as a revert; a failure raises the node to exit 3. It reports whether it worked.
func (r *run) putBack(ctx context.Context, what string, step func(context.Context) error) bool {
	r.journalRecord(JournalRevert)
	err := r.fencedStep(ctx, step)
	if err == nil {
		return true
	}
	if lost := r.lockLost(ctx, err); lost != nil {
		err = fmt.Errorf("%w (%v)", lost, err)
	}
	r.raise(exitcode.Infra, "confirm: "+what+": "+err.Error())
	r.log("error", "%s: confirm: %s: %v", r.d.Node, what, err)
	return false
}

// BootEntryScript prints what the node's default boot entry starts, read from the
// boot loader NixOS installed (a fixed script; its one optional argument is a root
// directory the paths are read under, for the table tests of recorded loader files):
//
//   - systemd-boot (systemd-boot-builder.py): loader.conf on the ESP (/boot, /efi or
//     /boot/efi) names the default entry exactly (nixos-generation-N.conf) or, with the
//     builder of boot counting, as a pattern (nixos-generation-*) that systemd-boot
//     resolves to the matching entry sorted first: the builder gives the default
//     generation a sort-key before every other ("nixor-default"). Entry files may carry
//     boot counters (nixos-generation-N+3.conf, +2-1) that are no part of the entry's
//     name; entries live on the XBOOTLDR partition (/boot) or the ESP. The entry's
//     "options init=" is printed.
//   - a unified kernel image (uki.nix: ukify's <name>[_<version>][+<tries>].efi under
//     EFI/Linux on the ESP or XBOOTLDR, a systemd-boot "type #2" entry): matched by
//     loader.conf's default like an entry file, or, with no loader.conf, the one
//     sorted first; its init is read from the embedded command line (.cmdline,
//     "init=<toplevel>/init ..."). Sort keys of UKIs (from their .osrel) are not read:
//     a UKI sorts after entry files, and UKIs among themselves by name, newest first.
//   - GRUB (install-grub.pl): the first menuentry, "NixOS - Default" (GRUB's default
//     entry 0, boot.loader.grub.default's default), its "linux ... init=".
//   - extlinux (extlinux-conf-builder.sh): the DEFAULT label's "APPEND init=".
//   - a container's /sbin/init (lxc-container.nix); on a NixOS system with none of
//     them (no boot loader, as a test VM or a nixos-container, which boot the system
//     profile's init), the system profile's init.
//
// It prints nothing otherwise (GRUB's "saved" default: not read).
const BootEntryScript = `set -e
root=${1:-}
esp=
for d in /boot /efi /boot/efi; do
	if [ -f "$root$d/loader/loader.conf" ]; then esp=$root$d; break; fi
done
if [ -z "$esp" ]; then
	for d in /boot /efi /boot/efi; do
		for f in "$root$d/EFI/Linux"/*.efi; do
			if [ -f "$f" ]; then esp=$root$d; break 2; fi
		done
	done
fi
if [ -n "$esp" ]; then
	pattern='*'
	if [ -f "$esp/loader/loader.conf" ]; then
		pattern=$(awk '$1 == "default" { d = $2 } END { print d }' "$esp/loader/loader.conf")
	fi
	[ -n "$pattern" ] || pattern='*'
	entry=$(for f in "$root/boot/loader/entries"/*.conf "$esp/loader/entries"/*.conf "$root/boot/EFI/Linux"/*.efi "$esp/EFI/Linux"/*.efi; do
		[ -f "$f" ] || continue
		id=$(basename "$f" | sed 's/+[0-9][0-9]*\(-[0-9][0-9]*\)\{0,1\}\.conf$/.conf/; s/+[0-9][0-9]*\(-[0-9][0-9]*\)\{0,1\}\.efi$/.efi/')
		case $id in
		$pattern | $pattern.conf | $pattern.efi) ;;
		*) continue ;;
		esac
		case $f in
		*.efi) key='~' ;;
		*) key=$(awk '$1 == "sort-key" { k = $2 } END { print (k == "" ? "~" : k) }' "$f") ;;
		esac
		gen=$(echo "$id" | sed -n 's/.*-generation-\([0-9][0-9]*\).*/\1/p')
		echo "$key ${gen:-0} $id $f"
	done | sort -k1,1 -k2,2nr -k3,3r | awk 'NR == 1 { print $4 }')
	case $entry in
	"") exit 0 ;;
	*.efi) LC_ALL=C tr -c '[:print:]' '\n' <"$entry" | tr ' ' '\n' | grep '^init=/nix/store/' | head -n 1 | cut -c6- ;;
	*) awk '$1 == "options" { for (i = 2; i <= NF; i++) if ($i ~ /^init=/) { print substr($i, 6); exit } }' "$entry" ;;
	esac
elif [ -f "$root/boot/grub/grub.cfg" ]; then
	awk '$1 == "menuentry" && !seen { seen = 1; in_entry = 1; next }
		in_entry && $1 == "}" { exit }
		in_entry && $1 == "linux" { for (i = 3; i <= NF; i++) if ($i ~ /^init=/) { print substr($i, 6); exit } }' "$root/boot/grub/grub.cfg"
elif [ -f "$root/boot/extlinux/extlinux.conf" ]; then
	awk 'toupper($1) == "DEFAULT" { d = $2 } toupper($1) == "LABEL" { l = $2 }
		toupper($1) == "APPEND" { for (i = 2; i <= NF; i++) if ($i ~ /^init=/) a[l] = substr($i, 6) }
		END { print a[d] }' "$root/boot/extlinux/extlinux.conf"
elif [ -L "$root/sbin/init" ]; then
	readlink -f "$root/sbin/init"
elif [ -e "$root/etc/NIXOS" ] && [ -L "$root/nix/var/nix/profiles/system" ]; then
	printf '%s/init\n' "$(readlink -f "$root/nix/var/nix/profiles/system")"
fi
`

// bootToplevel is the toplevel a boot entry's init belongs to: <toplevel>/init, or
// <toplevel>/prepare-root under a systemd initrd; "" for anything else (no NixOS
// entry, e.g. a distribution's own /sbin/init).
func bootToplevel(init string) string {
	dir, name := path.Split(strings.TrimSpace(init))
	dir = strings.TrimSuffix(dir, "/")
	if !strings.HasPrefix(dir, "/nix/store/") || (name != "init" && name != "prepare-root") {
		return ""
	}
	return dir
}

// readBootEntry reads the toplevel the node's default boot entry boots.
func (r *run) readBootEntry(ctx context.Context) (string, error) {
	out, err := r.execCheck(ctx, "sh", "-c", BootEntryScript)
	if err != nil {
		return "", fmt.Errorf("reading the boot entry: %w", err)
	}
	return bootToplevel(out), nil
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
