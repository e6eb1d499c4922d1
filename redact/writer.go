package redact

import (
	"bytes"
	"io"
	"sync"
)

// maxHeld bounds the bytes of an unfinished line a Writer holds back.
const maxHeld = 64 << 10

// Writer writes through to another writer with the Set's fragments redacted. It
// redacts whole lines, so it holds an unfinished line back until its newline,
// Flush, or maxHeld bytes (then it writes the line's start up to a point no
// fragment spans); while the Set is empty it holds nothing. It is safe for
// concurrent use.
type Writer struct {
	set  *Set
	w    io.Writer
	json bool

	mu   sync.Mutex
	held []byte
}

// NewWriter is a Writer of w redacting s's fragments.
func (s *Set) NewWriter(w io.Writer) *Writer { return &Writer{set: s, w: w} }

// NewJSONWriter is a Writer of a stream of JSON lines (OpenTofu's -json, events)
// redacting s's fragments inside their strings (Set.JSON), so that each line stays
// the same JSON.
func (s *Set) NewJSONWriter(w io.Writer) *Writer { return &Writer{set: s, w: w, json: true} }

// Write redacts and writes p's complete lines; it reports len(p) written unless
// the underlying writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.held = append(w.held, p...)
	n := bytes.LastIndexByte(w.held, '\n') + 1
	switch {
	case w.set.empty():
		n = len(w.held)
	case len(w.held)-n > maxHeld:
		n = w.set.cut(w.held, len(w.held)-maxHeld/2)
		if n == 0 && len(w.held) > 2*maxHeld {
			n = len(w.held) // a run of fragments with no cut: bounded anyway
		}
	}
	if n == 0 {
		return len(p), nil
	}
	err := w.emit(w.held[:n])
	w.held = append(w.held[:0], w.held[n:]...)
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes the unfinished line held back, redacted.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.held) == 0 {
		return nil
	}
	err := w.emit(w.held)
	w.held = w.held[:0]
	return err
}

// Close is Flush.
func (w *Writer) Close() error { return w.Flush() }

func (w *Writer) emit(b []byte) error {
	if w.json {
		_, err := w.w.Write(w.set.JSON(bytes.Clone(b)))
		return err
	}
	_, err := io.WriteString(w.w, w.set.String(string(b)))
	return err
}
