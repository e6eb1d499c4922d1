package node

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// Bound's context ends at the deadline with a *DeadlineError as its cause, which
// matches context.DeadlineExceeded; a caller's earlier deadline is its own.
func TestBoundDeadline(t *testing.T) {
	b := Bound(context.Background(), effects.Command{Argv: []string{"x"}}, 20*time.Millisecond)
	defer b.Release()
	select {
	case <-b.Ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the deadline did not end the context")
	}
	why := Stopped(b.Ctx)
	var d *DeadlineError
	if !errors.As(why, &d) || !errors.Is(why, context.DeadlineExceeded) || !IsBound(why) || !strings.Contains(why.Error(), "deadline") {
		t.Errorf("cause %v", why)
	}
	if b.Exceeded() != nil {
		t.Errorf("Exceeded = %v", b.Exceeded())
	}

	parent, cancel := context.WithCancel(context.Background())
	b = Bound(parent, effects.Command{Argv: []string{"x"}}, time.Hour)
	defer b.Release()
	cancel()
	<-b.Ctx.Done()
	if why := Stopped(b.Ctx); why != context.Canceled || IsBound(why) {
		t.Errorf("the caller's cancel: cause %v", why)
	}
	if b := Bound(context.Background(), effects.Command{}, 0); b.Ctx.Err() != nil {
		t.Error("no timeout is the default, not none")
	} else if dl, ok := b.Ctx.Deadline(); !ok || time.Until(dl) < DefaultCommandTimeout-time.Minute {
		t.Errorf("default deadline %v", dl)
	} else {
		b.Release()
	}
}

// Output past stream.MaxAnswer, stdout and stderr together, cancels the command
// with stream.ErrAnswerTooLarge; no more than the limit reaches the caller.
func TestBoundAnswer(t *testing.T) {
	var got counter
	b := Bound(context.Background(), effects.Command{Argv: []string{"x"}, Stdout: &got}, time.Hour)
	defer b.Release()
	chunk := make([]byte, 1<<20)
	for i := 0; i < stream.MaxAnswer>>20-1; i++ {
		b.Cmd.Stdout.Write(chunk)
	}
	b.Cmd.Stderr.Write(chunk[:1<<19])
	if b.Ctx.Err() != nil || b.Exceeded() != nil {
		t.Fatal("stopped within the limit")
	}
	if n, err := b.Cmd.Stdout.Write(chunk); n != len(chunk) || err != nil {
		t.Fatalf("the write past the limit: %d, %v", n, err)
	}
	b.Cmd.Stdout.Write(chunk)
	<-b.Ctx.Done()
	if why := Stopped(b.Ctx); !errors.Is(why, stream.ErrAnswerTooLarge) || !IsBound(why) || !errors.Is(b.Exceeded(), stream.ErrAnswerTooLarge) {
		t.Errorf("cause %v, Exceeded %v", why, b.Exceeded())
	}
	if want := int64(stream.MaxAnswer - 1<<19); got.n != want {
		t.Errorf("%d bytes reached stdout, want %d", got.n, want)
	}
}

type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// stuck is a node whose nix-store --serve reads nothing and never answers.
type stuck struct{}

func (stuck) Run(ctx context.Context, _ effects.Command) (int, error) {
	<-ctx.Done()
	return -1, Stopped(ctx)
}

// A copy that moves no byte for its idle bound fails with a *DeadlineError.
func TestCopyIdle(t *testing.T) {
	start := time.Now()
	var c Copies
	err := CopyClosure(context.Background(), stuck{}, &c, []string{"/nix/store/00000000000000000000000000000000-x"}, nil, 200*time.Millisecond, true)
	var d *DeadlineError
	if !errors.As(err, &d) || !d.Idle || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CopyClosure: %v; want the copy's idle deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v", took)
	}
	t.Log(err)
}

// A copy whose bytes keep moving is not cut by the idle bound, however long it lasts.
func TestCopyIdleMoving(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	w := watchIdle(100*time.Millisecond, cancel)
	defer w.stop()
	out := w.writer(io.Discard)
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		out.Write([]byte("x"))
	}
	if ctx.Err() != nil {
		t.Fatalf("cut while moving: %v", context.Cause(ctx))
	}
	time.Sleep(300 * time.Millisecond)
	if ctx.Err() == nil {
		t.Fatal("not cut after it stopped moving")
	}
}
