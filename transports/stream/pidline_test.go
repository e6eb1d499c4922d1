package stream

import (
	"bytes"
	"strings"
	"testing"
)

// The pid line is taken out whatever the split of the writes; everything else
// passes through unchanged, in order (issue 15 item 3).
func TestPIDLineStripping(t *testing.T) {
	cases := []struct {
		in, out string
		pid     int
	}{
		{"switchyard-pid 4242\nerr\n", "err\n", 4242},
		{"switchyard-pid 4242\n", "", 4242},
		{"rc file says hi\nswitchyard-pid 77\nerr", "rc file says hi\nerr", 77},
		{"switchyard-pid 77\nswitchyard-pid 78\n", "switchyard-pid 78\n", 77},
		{"switchyard-pidx 77\nswitchyard-pid 9\nx", "switchyard-pidx 77\nx", 9},
		{"switchyard-pid 12a\nswitchyard-pid 13\n", "switchyard-pid 12a\n", 13},
		{"switchyard-pid \nswitchyard-pid 1\n", "switchyard-pid \nswitchyard-pid 1\n", 0},
		{"switchyard-pid 12345678901\n", "switchyard-pid 12345678901\n", 0},
		{"no marker at all\nsecond line", "no marker at all\nsecond line", 0},
		{"switchyard-p", "switchyard-p", 0}, // held, then flushed
		{"", "", 0},
	}
	for _, c := range cases {
		for _, sizes := range [][]int{{len(c.in)}, {1}, {2}, {3}, {7}, {16}} {
			var out bytes.Buffer
			p := NewPIDLine(&out)
			in := c.in
			for i := 0; len(in) > 0; i++ {
				n := min(sizes[i%len(sizes)], len(in))
				if m, err := p.Write([]byte(in[:n])); m != n || err != nil {
					t.Fatalf("%q in writes of %v: Write = %d, %v", c.in, sizes, m, err)
				}
				in = in[n:]
			}
			if err := p.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != c.out || p.PID() != c.pid {
				t.Errorf("%q in writes of %v: passed %q, pid %d; want %q, %d", c.in, sizes, out.String(), p.PID(), c.out, c.pid)
			}
			select {
			case <-p.Ready():
				if c.pid == 0 {
					t.Errorf("%q: Ready closed without a pid", c.in)
				}
			default:
				if c.pid != 0 {
					t.Errorf("%q: Ready not closed", c.in)
				}
			}
		}
	}
}

// Output after the pid line is passed at once, not held for a newline.
func TestPIDLinePassesPartialLines(t *testing.T) {
	var out bytes.Buffer
	p := NewPIDLine(&out)
	_, _ = p.Write([]byte("switchyard-pid 5\nprogress 1"))
	if out.String() != "progress 1" {
		t.Errorf("after the pid line: passed %q, want %q", out.String(), "progress 1")
	}
	out.Reset()
	q := NewPIDLine(&out)
	_, _ = q.Write([]byte("a partial line, no marker"))
	if !strings.HasPrefix(out.String(), "a partial") {
		t.Errorf("a line that cannot be the marker was held: passed %q", out.String())
	}
	if NewPIDLine(nil).Flush() != nil {
		t.Error("nil writer")
	}
}
