package effects_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// flaky answers for a Node, but the first `fails` reads of /run/current-system
// (the switch's wait reads it with the result) find the node unreachable (the
// activation restarted sshd under the connection), and is-system-running answers
// `state` when set.
type flaky struct {
	*effectstest.Node
	fails int
	state string
}

func (f *flaky) Run(ctx context.Context, c effects.Command) (int, error) {
	argv := strings.Join(c.Argv, " ")
	if (argv == "readlink -f /run/current-system" || len(c.Argv) > 2 && c.Argv[2] == effects.SwitchWaitScript) && f.fails > 0 {
		f.fails--
		return 0, fmt.Errorf("session: connection reset: %w", effects.ErrUnreachable)
	}
	if argv == "systemctl is-system-running" && f.state != "" {
		fmt.Fprintln(c.Stdout, f.state)
		return 1, nil
	}
	return f.Node.Run(ctx, c)
}

// Issue 11 item 6: /run/current-system is read through a bounced connection (with
// the switch result, or by confirm), instead of failing the node with exit 3.
func TestConfirmRetriesWhileUnreachable(t *testing.T) {
	f := &flaky{Node: effectstest.Load(t, "healthy"), fails: 2}
	d := (&effects.Deploy{Node: "web1", Transport: f, Config: testConfig(false), Reporter: &effectstest.Events{},
		Source: effects.Source{Toplevel: f.Toplevel}}).WithSeams(func(context.Context, effects.Source) (string, error) { return f.Toplevel, nil }, time.Millisecond)
	res := d.Run(context.Background())
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchOK || f.fails != 0 {
		t.Errorf("exit %d switch %+v reasons %q (unreachable reads left %d)", res.ExitCode, res.Verdict.Switch, res.Verdict.Reasons, f.fails)
	}
}

// Issue 11 item 6: a node whose systemd answers "maintenance" is reachable, and the
// reason says what systemd said.
func TestWaitMaintenanceIsReachable(t *testing.T) {
	f := &flaky{Node: effectstest.Load(t, "healthy"), state: "maintenance"}
	d := (&effects.Deploy{Node: "web1", Transport: f, Config: testConfig(true), Reporter: &effectstest.Events{}}).WithSeams(nil, time.Millisecond)
	res := d.Run(context.Background())
	v := res.Verdict
	if res.ExitCode != exitcode.Infra || !v.Reachable || !strings.Contains(strings.Join(v.Reasons, ";"), `systemd is "maintenance" (rescue or emergency mode)`) {
		t.Errorf("exit %d reachable %v reasons %q", res.ExitCode, v.Reachable, v.Reasons)
	}
}

// Issue 11 item 5: a node running the toplevel whose boot entry starts something else
// is not "unchanged" all through: the switch is skipped, finalize runs.
func TestUnchangedNodeWithStaleBootEntryIsFinalized(t *testing.T) {
	f := effectstest.Load(t, "healthy") // its samples show the toplevel running and as the profile
	f.BootInit = "/usr/lib/systemd/systemd"
	ev := &effectstest.Events{}
	d := (&effects.Deploy{Node: "web1", Transport: f, Config: testConfig(false), Reporter: ev, SkipUnchanged: true,
		Source: effects.Source{Toplevel: f.Toplevel}}).WithSeams(func(context.Context, effects.Source) (string, error) { return f.Toplevel, nil }, time.Millisecond)
	res := d.Run(context.Background())
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchUnchanged || res.Verdict.BootEntry != f.Toplevel {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if f.Did("run systemd-run") != 0 || f.Did("finalize "+f.Toplevel) != 1 {
		t.Errorf("want no switch and one finalize: %v", f.Log())
	}
}

// gone answers for a Node, but the switch's unit is unknown to systemd when its
// result is read (it was stopped and unloaded, or the node restarted systemd).
type gone struct{ *effectstest.Node }

func (g gone) Run(ctx context.Context, c effects.Command) (int, error) {
	if strings.HasPrefix(strings.Join(c.Argv, " "), "systemctl show --property=LoadState,ActiveState,Result,ExecMainCode,ExecMainStatus") ||
		len(c.Argv) > 2 && c.Argv[2] == effects.SwitchWaitScript {
		fmt.Fprintln(c.Stdout, "LoadState=not-found\nActiveState=inactive\nResult=success\nExecMainCode=0\nExecMainStatus=0")
		return 0, nil
	}
	return g.Node.Run(ctx, c)
}

// Issue 11 item 6: a switch that started and whose result cannot be read is an
// error (exit 3, the cause named), never "skipped".
func TestSwitchResultGoneIsError(t *testing.T) {
	f := gone{effectstest.Load(t, "healthy")}
	ev := &effectstest.Events{}
	d := (&effects.Deploy{Node: "web1", Transport: f, Config: testConfig(false), Reporter: ev,
		Source: effects.Source{Toplevel: f.Toplevel}}).WithSeams(func(context.Context, effects.Source) (string, error) { return f.Toplevel, nil }, time.Millisecond)
	res := d.Run(context.Background())
	v := res.Verdict
	if res.ExitCode != exitcode.Infra || v.Switch.Result != verdict.SwitchError || v.Switch.ExitCode != -1 ||
		!strings.Contains(strings.Join(v.Reasons, ";"), "is gone before its result was read") {
		t.Errorf("exit %d switch %+v reasons %q", res.ExitCode, v.Switch, v.Reasons)
	}
}

// switchedBack answers for a Node whose switch ran past DEPLOY_SWITCH_TIMEOUT with
// confirmation on, read at the moment ConfirmSwitchScript has written the status (124,
// timeout(1)'s) but not yet the state of its switch back: the record still says
// "activating". The node then switches itself back to the previous generation.
type switchedBack struct {
	*effectstest.Node
	previous string
}

func (f *switchedBack) Run(ctx context.Context, c effects.Command) (int, error) {
	if len(c.Argv) > 2 && c.Argv[0] == "sh" {
		switch c.Argv[2] {
		case effects.SwitchWaitScript:
			f.Record("run switch wait")
			fmt.Fprintf(c.Stdout, "LoadState=loaded\nActiveState=activating\nResult=success\nExecMainCode=0\nExecMainStatus=0\nMainPID=42\n"+
				"record.state=activating\nrecord.status=124\nrecord.previous=%s\ncurrent=%s\n", f.previous, f.Toplevel)
			return 0, nil
		case effects.ConfirmScript:
			f.Record("run confirm read")
			fmt.Fprintf(c.Stdout, "record.state=rolled-back\nrecord.status=124\nrecord.rollback-status=0\nrecord.previous=%s\ncurrent=%s\n",
				f.previous, f.previous)
			return 0, nil
		}
	}
	return f.Node.Run(ctx, c)
}

// A switch stopped at DEPLOY_SWITCH_TIMEOUT whose record is read before the node's
// script began its switch back (state "activating", status 124): the body waits for
// the node's own decision, reports the generation it switched back to, and unloads
// the switch's unit, as when the record already said "rolling-back". (Seen on the
// test bed under load: the unit was left on the node and the body put the profile
// and boot entry back beside the node's own switch back.)
func TestSwitchTimeoutReadBeforeTheSwitchBack(t *testing.T) {
	f := &switchedBack{Node: effectstest.Load(t, "healthy")}
	f.previous = f.Current
	res, _ := deployThrough(t, f, f.Toplevel, testConfig(false))
	v := res.Verdict
	if res.ExitCode != exitcode.Verdict || v.Switch.Result != verdict.SwitchError {
		t.Errorf("exit %d switch %+v, want %d and an error", res.ExitCode, v.Switch, exitcode.Verdict)
	}
	if !strings.Contains(strings.Join(v.Reasons, ";"), "switched itself back to the generation it ran before") {
		t.Errorf("reasons %q, want the node's own switch back", v.Reasons)
	}
	if f.Did("run confirm read") == 0 || f.Did("run systemctl stop -- switchyard-switch-") != 1 || f.Did("run systemctl reset-failed -- switchyard-switch-") != 1 {
		t.Errorf("want the record read until the node decided, and the unit stopped and reset once: %q", switchSteps(f.Log()))
	}
	if f.Did("finalize") != 0 {
		t.Errorf("the body put the profile and boot entry back beside the node's own switch back: %q", switchSteps(f.Log()))
	}
}

// switchSteps is a fake node's log of the switch's steps, without the long scripts.
func switchSteps(log []string) []string {
	var steps []string
	for _, l := range log {
		if strings.HasPrefix(l, "run systemctl") || strings.HasPrefix(l, "run switch wait") || strings.HasPrefix(l, "run confirm") || strings.HasPrefix(l, "finalize") {
			steps = append(steps, l)
		}
	}
	return steps
}
