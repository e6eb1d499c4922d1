package effects

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// The switch's unit is bounded by TimeoutStartSec= (RuntimeMaxSec= does not bound a
// oneshot), after the transport's own options so the body's bound wins.
func TestSwitchArgvBoundsTheOneshot(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		extra   []string
		want    string
	}{
		{900 * time.Second, nil, "--property=TimeoutStartSec=900000ms"},
		{2500 * time.Millisecond, []string{"--property=TimeoutStartSec=1"}, "--property=TimeoutStartSec=2500ms"},
	} {
		argv := switchArgv("u", "/nix/store/x", c.timeout, c.extra)
		i := strings.Index(strings.Join(argv, " "), c.want)
		last := -1
		for j, a := range argv {
			if strings.HasPrefix(a, "--property=TimeoutStartSec=") {
				last = j
			}
		}
		if i < 0 || argv[last] != c.want || argv[last+1] != "--" || !contains(argv, "--service-type=oneshot") {
			t.Errorf("switchArgv(%s, %q) = %q, want %s last before --", c.timeout, c.extra, argv, c.want)
		}
	}
}

func TestBootToplevel(t *testing.T) {
	for in, want := range map[string]string{
		"/nix/store/abc-nixos-system-x/init\n":       "/nix/store/abc-nixos-system-x",
		"/nix/store/abc-nixos-system-x/prepare-root": "/nix/store/abc-nixos-system-x",
		"/usr/lib/systemd/systemd\n":                 "",
		"":                                           "",
		"/nix/store/abc-systemd/lib/systemd/systemd": "",
	} {
		if got := bootToplevel(in); got != want {
			t.Errorf("bootToplevel(%q) = %q, want %q", in, got, want)
		}
	}
}

// flaky answers for a fakeNode, but the first `fails` reads of /run/current-system
// find the node unreachable (the activation restarted sshd under the connection),
// and is-system-running answers `state` when set.
type flaky struct {
	*fakeNode
	fails int
	state string
}

func (f *flaky) Run(ctx context.Context, c Command) (int, error) {
	argv := strings.Join(c.Argv, " ")
	if argv == "readlink -f /run/current-system" && f.fails > 0 {
		f.fails--
		return 0, fmt.Errorf("session: connection reset: %w", ErrUnreachable)
	}
	if argv == "systemctl is-system-running" && f.state != "" {
		fmt.Fprintln(c.Stdout, f.state)
		return 1, nil
	}
	return f.fakeNode.Run(ctx, c)
}

// Issue 11 item 6: confirm reads /run/current-system through a bounced connection
// as the switch-result phase does, instead of failing the node with exit 3.
func TestConfirmRetriesWhileUnreachable(t *testing.T) {
	f := &flaky{fakeNode: loadFake(t, "healthy"), fails: 2}
	d := &Deploy{Node: "web1", Transport: f, Config: testConfig(false), Reporter: &events{},
		Source:  Source{Toplevel: f.toplevel},
		resolve: func(context.Context, Source) (string, error) { return f.toplevel, nil },
		poll:    time.Millisecond}
	res := d.Run(context.Background())
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchOK || f.fails != 0 {
		t.Errorf("exit %d switch %+v reasons %q (unreachable reads left %d)", res.ExitCode, res.Verdict.Switch, res.Verdict.Reasons, f.fails)
	}
}

// Issue 11 item 6: a node whose systemd answers "maintenance" is reachable, and the
// reason says what systemd said.
func TestWaitMaintenanceIsReachable(t *testing.T) {
	f := &flaky{fakeNode: loadFake(t, "healthy"), state: "maintenance"}
	d := &Deploy{Node: "web1", Transport: f, Config: testConfig(true), Reporter: &events{}, poll: time.Millisecond}
	res := d.Run(context.Background())
	v := res.Verdict
	if res.ExitCode != exitcode.Infra || !v.Reachable || !strings.Contains(strings.Join(v.Reasons, ";"), `systemd is "maintenance" (rescue or emergency mode)`) {
		t.Errorf("exit %d reachable %v reasons %q", res.ExitCode, v.Reachable, v.Reasons)
	}
}

// Issue 11 item 5: a node running the toplevel whose boot entry starts something else
// is not "unchanged" all through: the switch is skipped, finalize runs.
func TestUnchangedNodeWithStaleBootEntryIsFinalized(t *testing.T) {
	f := loadFake(t, "healthy") // its samples show the toplevel running and as the profile
	f.bootInit = "/usr/lib/systemd/systemd"
	ev := &events{}
	d := &Deploy{Node: "web1", Transport: f, Config: testConfig(false), Reporter: ev, SkipUnchanged: true,
		Source:  Source{Toplevel: f.toplevel},
		resolve: func(context.Context, Source) (string, error) { return f.toplevel, nil }, poll: time.Millisecond}
	res := d.Run(context.Background())
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchUnchanged || res.Verdict.BootEntry != f.toplevel {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if f.did("run systemd-run") != 0 || f.did("finalize "+f.toplevel) != 1 {
		t.Errorf("want no switch and one finalize: %v", f.log)
	}
}

// gone answers for a fakeNode, but the switch's unit is unknown to systemd when its
// result is read (it was stopped and unloaded, or the node restarted systemd).
type gone struct{ *fakeNode }

func (g gone) Run(ctx context.Context, c Command) (int, error) {
	if strings.HasPrefix(strings.Join(c.Argv, " "), "systemctl show --property=LoadState,ActiveState,Result,ExecMainCode,ExecMainStatus") {
		fmt.Fprintln(c.Stdout, "LoadState=not-found\nActiveState=inactive\nResult=success\nExecMainCode=0\nExecMainStatus=0")
		return 0, nil
	}
	return g.fakeNode.Run(ctx, c)
}

// Issue 11 item 6: a switch that started and whose result cannot be read is an
// error (exit 3, the cause named), never "skipped".
func TestSwitchResultGoneIsError(t *testing.T) {
	f := gone{loadFake(t, "healthy")}
	ev := &events{}
	d := &Deploy{Node: "web1", Transport: f, Config: testConfig(false), Reporter: ev,
		Source:  Source{Toplevel: f.toplevel},
		resolve: func(context.Context, Source) (string, error) { return f.toplevel, nil },
		poll:    time.Millisecond}
	res := d.Run(context.Background())
	v := res.Verdict
	if res.ExitCode != exitcode.Infra || v.Switch.Result != verdict.SwitchError || v.Switch.ExitCode != -1 ||
		!strings.Contains(strings.Join(v.Reasons, ";"), "is gone before its result was read") {
		t.Errorf("exit %d switch %+v reasons %q", res.ExitCode, v.Switch, v.Reasons)
	}
}
