package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// The bounds of a node's commands (SPEC 6.9): each has a deadline and its output
// is read up to stream.MaxAnswer, so a hostile node can neither exhaust the
// deployer's memory nor stall a run past its bounds.
const (
	// DefaultCommandTimeout is a command's deadline unless the transport's
	// configuration says otherwise. Every command of the deploy body is short
	// (the switch runs detached, in a transient unit the body waits on in slices
	// of seconds), and those that may last (systemctl restart, a bootloader
	// install) are bounded by the body itself well within it; a caller's
	// earlier deadline wins.
	DefaultCommandTimeout = 10 * time.Minute
	// ReadTimeout bounds the transports' own short reads (readlink, test -e, the
	// instance's type): within the command's deadline, never past it.
	ReadTimeout = 2 * time.Minute
	// DefaultCopyIdle bounds the closure copy, whose length grows with the
	// closure: it fails once no byte has moved to or from the node for that long.
	DefaultCopyIdle = 10 * time.Minute
)

// DeadlineError is why a command ran out of its deadline: its cause (a
// context's), matching context.DeadlineExceeded with errors.Is.
type DeadlineError struct {
	What    string        // "command", "copy"
	Timeout time.Duration // the bound
	Idle    bool          // the bound is on silence, not on the whole
}

func (e *DeadlineError) Error() string {
	if e.Idle {
		return fmt.Sprintf("no byte moved to or from the node for %v (the %s's deadline)", e.Timeout, e.What)
	}
	return fmt.Sprintf("no answer within %v (the %s's deadline)", e.Timeout, e.What)
}

func (e *DeadlineError) Unwrap() error { return context.DeadlineExceeded }

// Bounded is one command under its bounds, made by Bound.
type Bounded struct {
	// Ctx is the command's context: the caller's, with the deadline, and
	// cancelled with stream.ErrAnswerTooLarge as its cause once the output
	// passed stream.MaxAnswer.
	Ctx context.Context
	// Cmd is the command with its Stdout and Stderr counted (nil ones too: a
	// node that floods a discarded stream is stopped as well).
	Cmd effects.Command

	limit  *stream.Limit
	cancel context.CancelCauseFunc
	stopT  context.CancelFunc
}

// Bound puts cmd under its bounds: timeout (DefaultCommandTimeout when not
// positive) as its deadline unless ctx ends first, and stream.MaxAnswer on its
// output. The transport runs b.Cmd under b.Ctx, stops the command when b.Ctx is
// done, as on a cancel, and then calls Release.
func Bound(ctx context.Context, cmd effects.Command, timeout time.Duration) *Bounded {
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	tctx, stopT := context.WithTimeoutCause(ctx, timeout, &DeadlineError{What: "command", Timeout: timeout})
	cctx, cancel := context.WithCancelCause(tctx)
	b := &Bounded{Ctx: cctx, cancel: cancel, stopT: stopT}
	b.limit = stream.NewLimit(stream.MaxAnswer, func() { cancel(stream.ErrAnswerTooLarge) })
	cmd.Stdout, cmd.Stderr = b.limit.Writer(cmd.Stdout), b.limit.Writer(cmd.Stderr)
	b.Cmd = cmd
	return b
}

// Release frees the bounds' timer.
func (b *Bounded) Release() {
	b.cancel(nil)
	b.stopT()
}

// Exceeded is stream.ErrAnswerTooLarge once the output passed the limit (also
// when the command ended on its own right after), else nil.
func (b *Bounded) Exceeded() error {
	if b.limit.Exceeded() {
		return stream.ErrAnswerTooLarge
	}
	return nil
}

// Stopped is why a command ended before its end: its output passed the limit,
// its deadline (a *DeadlineError), or the caller's context's own cause.
func Stopped(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return ctx.Err()
}

// IsBound tells whether err is one of the bounds' own: the answer too large or
// a command's deadline.
func IsBound(err error) bool {
	var d *DeadlineError
	return errors.Is(err, stream.ErrAnswerTooLarge) || errors.As(err, &d)
}

// idleWatch cancels a copy that moved no byte for idle: reads of what goes to the
// node and writes of what comes from it count as progress.
type idleWatch struct {
	moved atomic.Int64
	done  chan struct{}
}

func watchIdle(idle time.Duration, cancel context.CancelCauseFunc) *idleWatch {
	w := &idleWatch{done: make(chan struct{})}
	tick := max(idle/4, time.Millisecond)
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		last, since := w.moved.Load(), time.Now()
		for {
			select {
			case <-w.done:
				return
			case now := <-t.C:
				if m := w.moved.Load(); m != last {
					last, since = m, now
				} else if now.Sub(since) >= idle {
					cancel(&DeadlineError{What: "copy", Timeout: idle, Idle: true})
					return
				}
			}
		}
	}()
	return w
}

func (w *idleWatch) stop() { close(w.done) }

func (w *idleWatch) reader(r io.Reader) io.Reader {
	if r == nil {
		return nil
	}
	return readFunc(func(p []byte) (int, error) {
		n, err := r.Read(p)
		w.moved.Add(int64(n))
		return n, err
	})
}

func (w *idleWatch) writer(wr io.Writer) io.Writer {
	if wr == nil {
		return nil
	}
	return writeFunc(func(p []byte) (int, error) {
		n, err := wr.Write(p)
		w.moved.Add(int64(n))
		return n, err
	})
}

type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

type writeFunc func([]byte) (int, error)

func (f writeFunc) Write(p []byte) (int, error) { return f(p) }
