package stream

import (
	"bytes"
	"strings"
	"testing"
)

func TestLastLine(t *testing.T) {
	if got := LastLine("copying 2 paths...\nerror: path '/nix/store/x' is not valid\n\n  \n"); got != "error: path '/nix/store/x' is not valid" {
		t.Errorf("LastLine = %q", got)
	}
	var tl Tail
	tl.Write([]byte(strings.Repeat("x", 3*TailMax)))
	tl.Write([]byte("\nlast line\n"))
	if len(tl.String()) > TailMax || tl.LastLine() != "last line" {
		t.Errorf("tail: %d bytes, last line %q", len(tl.String()), tl.LastLine())
	}
}

func TestGate(t *testing.T) {
	var b bytes.Buffer
	g := NewGate(&b)
	g.Write([]byte("before"))
	g.Close()
	if n, err := g.Write([]byte("after")); n != 5 || err != nil {
		t.Errorf("write after close: %d %v", n, err)
	}
	if b.String() != "before" {
		t.Errorf("got %q", b.String())
	}
	if n, _ := NewGate(nil).Write([]byte("x")); n != 1 {
		t.Errorf("nil writer must discard")
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	var tl Tail
	tl.Write([]byte("first\nsecond line  \n\n"))
	if got := tl.LastLine(); got != "second line" {
		t.Fatalf("LastLine = %q", got)
	}
	tl.Write(bytes.Repeat([]byte("x"), 2*TailMax))
	if got := tl.LastLine(); len(got) != TailMax {
		t.Fatalf("tail kept %d bytes, want %d", len(got), TailMax)
	}
}
