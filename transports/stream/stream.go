// Package stream holds the writers the transports share: a gate that stops passing a
// command's output once Run has returned, and a tail that keeps the end of stderr
// for one-line error messages.
package stream

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// Gate passes writes to w until Close; later writes are dropped (and reported
// written, so the producer is never blocked). A nil w discards.
type Gate struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

// NewGate gates w.
func NewGate(w io.Writer) *Gate { return &Gate{w: w} }

func (g *Gate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed || g.w == nil {
		return len(p), nil
	}
	return g.w.Write(p)
}

// Close stops passing writes.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// TailMax is how many bytes a Tail keeps.
const TailMax = 16 << 10

// Tail keeps the last TailMax bytes written to it; safe for concurrent use.
type Tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > TailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-TailMax:]...)
	}
	return len(p), nil
}

// String is what the tail holds, as valid UTF-8.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.b, nil))
}

// LastLine is the last non-empty line written, trimmed.
func (t *Tail) LastLine() string { return LastLine(t.String()) }

// LastLine is the last non-empty line of s, trimmed.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}
