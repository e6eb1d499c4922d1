package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// SystemProfile is the NixOS system profile, which the boot loader installer reads.
const SystemProfile = "/nix/var/nix/profiles/system"

// Runner runs a command on the node: the transport's own Run.
type Runner interface {
	Run(ctx context.Context, cmd effects.Command) (int, error)
}

// wrapped is an error with its own message that still matches its kind (a
// sentinel of effects: ErrUnreachable, ErrRefused, ErrNoSudo) and its cause with
// errors.Is/As.
type wrapped struct {
	msg   string
	kind  error
	cause error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// Wrap is an error with the message msg that matches kind and cause (which may
// be nil) with errors.Is/As.
func Wrap(kind, cause error, msg string) error {
	return &wrapped{msg: msg, kind: kind, cause: cause}
}

// Unreachable is an error where the node could not be reached
// (effects.ErrUnreachable): the formatted message, then the cause's when there is one.
func Unreachable(cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return Wrap(effects.ErrUnreachable, cause, msg)
}

// Refused is an error where the node must not be touched (effects.ErrRefused),
// e.g. a host key or server certificate that is not the pinned one. The message
// is the format's alone (a cause's text may name what should not be shown); the
// cause, which may be nil, is kept for errors.Is/As.
func Refused(cause error, format string, args ...any) error {
	return Wrap(effects.ErrRefused, cause, fmt.Sprintf(format, args...)+": refusing to touch the node")
}

// Step runs one command of a bootloader hook; its error names the step, the exit
// status and the last line of stderr.
func Step(ctx context.Context, r Runner, what string, path []string, argv ...string) error {
	var errOut stream.Tail
	code, err := r.Run(ctx, effects.Command{Argv: argv, Stderr: &errOut, Path: path})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return stepExit(what, argv[0], code, &errOut)
}

// stepExit is the error of a step whose command cmd exited code (nil for 0): the
// step, the exit status and stderr's last line.
func stepExit(what, cmd string, code int, errOut *stream.Tail) error {
	if code == 0 {
		return nil
	}
	msg := fmt.Sprintf("%s: %s exited %d", what, cmd, code)
	if last := errOut.LastLine(); last != "" {
		msg += ": " + last
	}
	return errors.New(msg)
}

// FinalizeScript is finalize's two steps in one command: it points the system
// profile ($1) at the toplevel ($2) with nix-env, then installs the boot entry with
// the toplevel's own switch-to-configuration boot. It is a fixed text; the paths
// are its arguments. The marker line it prints before the second step tells which
// step a failure belongs to. One command instead of two saves a round trip at the
// end of every node's deploy.
const FinalizeScript = `nix-env -p "$1" --set "$2" || exit
printf '%s\n' '` + bootMarker + `'
exec "$2/bin/switch-to-configuration" boot
`

const bootMarker = "##switchyard-finalize boot"

// Finalize runs FinalizeScript for toplevel, with toplevel's sw/bin first on PATH.
// Its error names the step as Step's does: "set the system profile: nix-env exited
// 1: ..." or "install the boot entry: <toplevel>/bin/switch-to-configuration exited
// 1: ...".
func Finalize(ctx context.Context, r Runner, toplevel string) error {
	var out markerWriter
	var errOut stream.Tail
	code, err := r.Run(ctx, effects.Command{
		Argv:   []string{"sh", "-c", FinalizeScript, "sh", SystemProfile, toplevel},
		Stdout: &out, Stderr: &errOut, Path: []string{toplevel + "/sw/bin"},
	})
	what, cmd := "set the system profile", "nix-env"
	if out.seen {
		what, cmd = "install the boot entry", toplevel+"/bin/switch-to-configuration"
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return stepExit(what, cmd, code, &errOut)
}

// markerWriter notes whether FinalizeScript's marker line went by, however the
// output is cut into writes; the rest is dropped.
type markerWriter struct {
	line []byte
	seen bool
}

func (w *markerWriter) Write(p []byte) (int, error) {
	for _, b := range p {
		switch {
		case w.seen:
		case b == '\n':
			w.seen = string(w.line) == bootMarker
			w.line = w.line[:0]
		case len(w.line) <= len(bootMarker):
			w.line = append(w.line, b)
		}
	}
	return len(p), nil
}

// NoSwitchRuntimeArgs is embedded by a transport that adds no options to the
// switch's unit: the body bounds it by DEPLOY_SWITCH_TIMEOUT (TimeoutStartSec=),
// the same over every transport.
type NoSwitchRuntimeArgs struct{}

// SwitchRuntimeMaxArgs adds nothing.
func (NoSwitchRuntimeArgs) SwitchRuntimeMaxArgs() []string { return nil }

// Copies is embedded by a transport that copies closures with CopyClosure: it
// keeps what the last copy did.
type Copies struct {
	last nixserve.Last
}

// LastCopy tells what the transport's last CopyClosure did: the paths of the
// closure, how many the node lacked, how many were sent and the bytes written.
// After a failed copy it holds what was done before the failure.
func (c *Copies) LastCopy() nixserve.Stats { return c.last.Get() }

// CopyCounts is LastCopy for the deploy body (effects.CopyCounter).
func (c *Copies) CopyCounts() (paths, missing, sent int, bytes int64) {
	st := c.LastCopy()
	return st.Paths, st.Missing, st.Sent, st.Bytes
}

// CopySubstituted is LastCopy's substitution for the deploy body
// (effects.SubstituteCounter).
func (c *Copies) CopySubstituted() (asked bool, substituted int, failed string) {
	st := c.LastCopy()
	return st.Substitute, st.Substituted, st.SubstituteFailed
}

// CopyClosure makes paths and their closures valid on the node: `nix-store --serve
// --write` runs there through r, is asked once which paths of the closure it holds,
// and gets the missing ones streamed in dependency order (nixserve.CopyThrough, with
// this machine's Nix as the local store). The node adds each path as it arrives, so
// after a cut the next copy sends only what is still missing. wrap, when not nil,
// wraps what is written to the node (for tests). c records what the copy did.
// With substitute the node first fetches what its own binary caches hold
// (nixserve.Options.Substitute); only the rest is streamed.
//
// r runs the copy's command without the bounds of other commands (its stream is
// the one a deploy sends, and lasts as long as the closure is large); the copy
// fails instead once no byte has moved to or from the node for idle
// (DefaultCopyIdle when not positive), its error a *DeadlineError.
func CopyClosure(ctx context.Context, r Runner, c *Copies, paths []string, wrap func(io.Writer) io.Writer, idle time.Duration, substitute bool) error {
	if idle <= 0 {
		idle = DefaultCopyIdle
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watch := watchIdle(idle, cancel)
	defer watch.stop()
	run := func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		// What the node's nix-store says on stderr counts as life too: while it
		// substitutes from its caches, nothing moves on the protocol's stream.
		return r.Run(ctx, effects.Command{Argv: argv, Stdin: watch.reader(stdin), Stdout: watch.writer(stdout), Stderr: watch.writer(stderr)})
	}
	st, err := nixserve.CopyThroughWith(ctx, run, paths, wrap, nixserve.Options{Substitute: substitute})
	c.last.Set(st)
	return err
}
