package node

import (
	"context"
	"errors"
	"io"
	"slices"
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

// runner answers every command with a fixed exit status, stdout and stderr.
type runner struct {
	code   int
	stdout string
	stderr string
	err    error
	argv   []string
	path   []string
}

func (r *runner) Run(_ context.Context, c effects.Command) (int, error) {
	r.argv, r.path = c.Argv, c.Path
	if c.Stdout != nil {
		// In two writes, cut inside a line, as a stream may be.
		io.WriteString(c.Stdout, r.stdout[:len(r.stdout)/2])
		io.WriteString(c.Stdout, r.stdout[len(r.stdout)/2:])
	}
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

// Finalize runs both steps in one command; a failure is named by the step the
// script's marker says it reached.
func TestFinalize(t *testing.T) {
	ctx := context.Background()
	top := "/nix/store/aaaa-nixos-system"
	r := &runner{stdout: "##switchyard-finalize boot\nupdating\n"}
	if err := Finalize(ctx, r, top); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sh", "-c", FinalizeScript, "sh", SystemProfile, top}; !slices.Equal(r.argv, want) || !slices.Equal(r.path, []string{top + "/sw/bin"}) {
		t.Errorf("ran %q with path %q", r.argv, r.path)
	}
	cases := []struct {
		r    *runner
		want string
	}{
		{&runner{code: 1, stderr: "error: cannot set profile\n"}, "set the system profile: nix-env exited 1: error: cannot set profile"},
		{&runner{code: 1, stdout: "##switchyard-finalize bootx\n", stderr: "x\n"}, "set the system profile: nix-env exited 1: x"},
		{&runner{code: 4, stdout: "generation\n##switchyard-finalize boot\n", stderr: "boot loader failed\n"},
			"install the boot entry: " + top + "/bin/switch-to-configuration exited 4: boot loader failed"},
	}
	for _, c := range cases {
		if err := Finalize(ctx, c.r, top); err == nil || err.Error() != c.want {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
	r = &runner{code: -1, stdout: "##switchyard-finalize boot\n", err: Unreachable(nil, "gone")}
	if err := Finalize(ctx, r, top); !errors.Is(err, effects.ErrUnreachable) || !strings.HasPrefix(err.Error(), "install the boot entry: ") {
		t.Errorf("a transport error must stay matchable and name the step: %v", err)
	}
}
