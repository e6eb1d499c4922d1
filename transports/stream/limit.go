package stream

import (
	"errors"
	"io"
	"sync"
)

// MaxAnswer is how much output of one node command the deployer reads, stdout
// and stderr together (SPEC 6.9): a node that answers more fails the command
// (ErrAnswerTooLarge) instead of filling the deployer's memory. The closure
// copy's stream is not bounded by it.
const MaxAnswer = 64 << 20

// ErrAnswerTooLarge is the error of a command whose output passed MaxAnswer.
var ErrAnswerTooLarge = errors.New("node answer exceeds 64 MiB")

// Limit counts the bytes written through its writers, all of one command's
// streams together, and passes at most max of them on. The write that passes
// max is cut at it, over is called (once), and from then on every write is
// dropped and reported written, so the transport's reader keeps draining the
// stream (a reader that stopped would stall the connection's flow control)
// until the command is stopped. Safe for concurrent use.
type Limit struct {
	mu      sync.Mutex
	left    int64
	over    func()
	tripped bool
}

// NewLimit passes max bytes; over, which may be nil, is called when a write
// passes them. It must not block.
func NewLimit(max int64, over func()) *Limit {
	return &Limit{left: max, over: over}
}

// Exceeded tells whether the output passed the limit.
func (l *Limit) Exceeded() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tripped
}

// Writer passes what is written to w (nil: discarded) within the limit.
func (l *Limit) Writer(w io.Writer) io.Writer {
	if w == nil {
		w = io.Discard
	}
	return &limited{l: l, w: w}
}

// take reserves up to n bytes of what is left: how many may be passed on, and
// whether this write passed the limit.
func (l *Limit) take(n int) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tripped {
		return 0, false
	}
	if int64(n) <= l.left {
		l.left -= int64(n)
		return n, false
	}
	m := int(l.left)
	l.left, l.tripped = 0, true
	return m, true
}

type limited struct {
	l *Limit
	w io.Writer
}

func (lw *limited) Write(p []byte) (int, error) {
	n, passed := lw.l.take(len(p))
	if n > 0 {
		if m, err := lw.w.Write(p[:n]); err != nil {
			return m, err
		}
	}
	if passed && lw.l.over != nil {
		lw.l.over()
	}
	return len(p), nil
}
