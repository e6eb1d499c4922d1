package stream

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// Both streams of a command count against one limit; the write that passes it is
// cut there, over is called once, and later writes are dropped but reported
// written, so the reader keeps draining.
func TestLimit(t *testing.T) {
	calls := 0
	l := NewLimit(10, func() { calls++ })
	var out, errOut bytes.Buffer
	w, e := l.Writer(&out), l.Writer(&errOut)
	for _, c := range []struct {
		w    io.Writer
		s    string
		over bool
	}{{w, "abcd", false}, {e, "efg", false}, {w, "hijklm", true}, {e, "nop", true}, {w, "q", true}} {
		if n, err := c.w.Write([]byte(c.s)); n != len(c.s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", c.s, n, err)
		}
		if l.Exceeded() != c.over {
			t.Errorf("after %q: Exceeded = %v", c.s, l.Exceeded())
		}
	}
	if out.String() != "abcdhij" || errOut.String() != "efg" || calls != 1 {
		t.Errorf("passed %q and %q, over called %d times; want %q, %q, once", out.String(), errOut.String(), calls, "abcdhij", "efg")
	}
	// Exactly the limit is not past it; a nil writer counts and discards.
	l = NewLimit(3, nil)
	if _, _ = l.Writer(nil).Write([]byte("abc")); l.Exceeded() {
		t.Error("3 bytes of 3 passed the limit")
	}
	if _, _ = l.Writer(nil).Write([]byte("d")); !l.Exceeded() {
		t.Error("4 bytes of 3 did not pass the limit")
	}
	if !strings.Contains(ErrAnswerTooLarge.Error(), "64 MiB") || MaxAnswer != 64<<20 {
		t.Errorf("MaxAnswer %d, %q", MaxAnswer, ErrAnswerTooLarge)
	}
}
