package node

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// LastCopy is per transport (each embeds its own Copies) and tells the last copy.
func TestLastCopy(t *testing.T) {
	var a, b Copies
	a.last.Set(nixserve.Stats{Paths: 3, Missing: 2, Sent: 2, Bytes: 100})
	a.last.Set(nixserve.Stats{Paths: 3})
	if got := a.LastCopy(); got != (nixserve.Stats{Paths: 3}) {
		t.Errorf("a: %+v", got)
	}
	if got := b.LastCopy(); got != (nixserve.Stats{}) {
		t.Errorf("b, which copied nothing: %+v", got)
	}
	a.last.Set(nixserve.Stats{Paths: 5, Missing: 4, Sent: 3, Bytes: 7})
	if p, m, s, n := a.CopyCounts(); p != 5 || m != 4 || s != 3 || n != 7 {
		t.Errorf("CopyCounts = %d %d %d %d", p, m, s, n)
	}
}

// The errors match their kind and cause by value, never by their text.
func TestErrorsMatchByValue(t *testing.T) {
	cause := errors.New("connection refused")
	u := Unreachable(cause, "ssh %s", "127.0.0.1:22")
	if !errors.Is(u, effects.ErrUnreachable) || !errors.Is(u, cause) || errors.Is(u, effects.ErrRefused) {
		t.Errorf("Unreachable matches wrongly: %v", u)
	}
	if u.Error() != "ssh 127.0.0.1:22: connection refused" {
		t.Errorf("Unreachable message %q", u.Error())
	}
	r := Refused(cause, "host key of %s is not the pinned one", "n1")
	if !errors.Is(r, effects.ErrRefused) || !errors.Is(r, cause) || strings.Contains(r.Error(), cause.Error()) {
		t.Errorf("Refused %q: must match its kind and cause and keep the cause's text out", r)
	}
	if r := Refused(nil, "x"); !errors.Is(r, effects.ErrRefused) || r.Error() != "x: refusing to touch the node" {
		t.Errorf("Refused without cause: %q", r)
	}
	if w := Wrap(effects.ErrNoSudo, nil, "no sudo"); !errors.Is(w, effects.ErrNoSudo) || w.Error() != "no sudo" {
		t.Errorf("Wrap: %q", w)
	}
}

// runner answers every command with a fixed exit status and stderr.
type runner struct {
	code   int
	stderr string
	err    error
	argv   []string
	path   []string
}

func (r *runner) Run(_ context.Context, c effects.Command) (int, error) {
	r.argv, r.path = c.Argv, c.Path
	if c.Stderr != nil {
		io.WriteString(c.Stderr, r.stderr)
	}
	return r.code, r.err
}

// A bootloader step's error names the step, the exit status and stderr's last line.
func TestStep(t *testing.T) {
	ctx := context.Background()
	r := &runner{}
	if err := Step(ctx, r, "set the system profile", []string{"/x/sw/bin"}, "nix-env", "-p", SystemProfile); err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.argv, " ") != "nix-env -p /nix/var/nix/profiles/system" || len(r.path) != 1 {
		t.Errorf("ran %q with path %q", r.argv, r.path)
	}
	r = &runner{code: 2, stderr: "first\nno such profile\n"}
	err := Step(ctx, r, "set the system profile", nil, "nix-env")
	if err == nil || err.Error() != "set the system profile: nix-env exited 2: no such profile" {
		t.Errorf("err = %v", err)
	}
	r = &runner{code: -1, err: Unreachable(nil, "gone")}
	if err := Step(ctx, r, "install the boot entry", nil, "x"); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("a transport error must stay matchable: %v", err)
	}
}
