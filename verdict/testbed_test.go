package verdict_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/verdict"
)

// incusExec runs argv on the node through the Incus API's exec (testbed.Node.Exec),
// the way the incus transport reaches a node.
func incusExec(node *testbed.Node) verdict.Exec {
	return func(ctx context.Context, argv []string, stdout io.Writer) (int, error) {
		out, err := node.Exec(ctx, argv...)
		if _, werr := io.WriteString(stdout, out); werr != nil {
			return -1, werr
		}
		var exitErr *testbed.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode(), nil
		}
		if err != nil {
			return -1, err
		}
		return 0, nil
	}
}

// TestReadLiveNode reads a real node in one round trip: healthy after a switch, then
// with its bus severed (not read, never read as empty), then restored.
func TestReadLiveNode(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	top := bed.Build(t, "healthy", "")
	node := bed.Node(t)
	node.CopyClosure(t, top)
	if code := node.Switch(t, top, "switch"); code != 0 {
		t.Fatalf("switch exited %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	read := func() verdict.Sample {
		t.Helper()
		start := time.Now()
		s, err := verdict.Read(ctx, incusExec(node))
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		t.Logf("read %d units in %v", len(s.Units), time.Since(start).Round(time.Millisecond))
		return s
	}

	s := read()
	if s.SystemState != "running" {
		t.Errorf("SystemState %q, want running (unread: %q)", s.SystemState, s.Unread)
	}
	if n := len(s.Units); n < 100 || n > 400 {
		t.Errorf("%d units read, want about 150", n)
	}
	if u := s.Units["hello.service"]; u.ActiveState != "active" || u.InvocationID == "" {
		t.Errorf("hello.service = %+v, want active with an invocation", u)
	}
	if s.Jobs == nil || s.Unread != nil {
		t.Errorf("jobs %v, unread %q: want everything read", s.Jobs, s.Unread)
	}
	if s.CurrentSystem != top {
		t.Errorf("CurrentSystem %q, want %q", s.CurrentSystem, top)
	}
	if now := time.Now().Unix(); s.NodeNow < now-60 || s.NodeNow > now+60 || s.Activated < s.NodeNow-300 || s.Activated > s.NodeNow {
		t.Errorf("node clock %d, activated %d; host clock %d", s.NodeNow, s.Activated, now)
	}

	// Sever root's way to systemd: the system bus, and the private socket systemctl
	// uses as root.
	node.MustExec(t, "sh", "-c", "systemctl stop dbus.socket dbus.service && mv /run/systemd/private /run/systemd/private.off")
	s = read()
	if s.SystemState != "" || s.Units != nil || s.Jobs != nil {
		t.Errorf("severed bus read as state %q, %d units (nil %v), jobs %v: want not read", s.SystemState, len(s.Units), s.Units == nil, s.Jobs)
	}
	if !strings.Contains(strings.Join(s.Unread, "\n"), "units: exit 1: Failed to connect to bus") {
		t.Errorf("Unread = %q, want the bus failure named", s.Unread)
	}
	if s.NodeNow == 0 || s.CurrentSystem != top {
		t.Errorf("clock %d, current %q: what does not need the bus must still read", s.NodeNow, s.CurrentSystem)
	}
	c := verdict.Classify(verdict.Input{Samples: []verdict.Sample{s}})
	if c.Failed != nil || c.SetAside != nil {
		t.Errorf("classes of a severed bus = %+v, want not read", c)
	}

	node.MustExec(t, "sh", "-c", "mv /run/systemd/private.off /run/systemd/private && systemctl start dbus.socket dbus.service")
	if s = read(); s.Units == nil || s.SystemState == "" {
		t.Errorf("after restoring the bus: state %q, units nil %v", s.SystemState, s.Units == nil)
	}
}
