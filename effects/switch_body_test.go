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
