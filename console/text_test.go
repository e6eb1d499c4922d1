package console

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/verdict"
)

// screen is a fake terminal: it applies what Text writes (text, \n, \r, cursor
// up ESC[nA, erase line ESC[K, erase below ESC[J) to rows, so a test reads what a
// person would see. stdout and stderr both write to it, as on a real terminal.
type screen struct {
	mu     sync.Mutex
	rows   []string
	row    int
	col    int
	writes int
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	b := string(p)
	for len(b) > 0 {
		for s.row >= len(s.rows) {
			s.rows = append(s.rows, "")
		}
		switch {
		case strings.HasPrefix(b, "\x1b["):
			i := strings.IndexAny(b, "AKJ")
			n, _ := strconv.Atoi(b[2:i])
			switch b[i] {
			case 'A':
				s.row -= n
				if s.row < 0 {
					panic("cursor above the screen")
				}
			case 'K':
				s.rows[s.row] = s.rows[s.row][:min(s.col, len(s.rows[s.row]))]
			case 'J':
				s.rows[s.row] = s.rows[s.row][:min(s.col, len(s.rows[s.row]))]
				s.rows = s.rows[:s.row+1]
			}
			b = b[i+1:]
		case b[0] == '\n':
			s.row++
			s.col = 0
			b = b[1:]
		case b[0] == '\r':
			s.col = 0
			b = b[1:]
		default:
			line := s.rows[s.row]
			for len(line) < s.col {
				line += " "
			}
			s.rows[s.row] = line[:s.col] + b[:1] + line[min(len(line), s.col+1):]
			s.col++
			b = b[1:]
		}
	}
	return len(p), nil
}

// lines is the screen's text, without the empty row under the cursor.
func (s *screen) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.rows...)
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// Issue 13, part 2: on a terminal, one status line per node updated in place (phase,
// elapsed, bytes copied when known), logs and verdict blocks above the block, never a
// line per phase; lines are cut to the terminal's width.
func TestTerminalProgress(t *testing.T) {
	scr := &screen{}
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	o := NewTextOn(scr, scr, &Terminal{Width: func() int { return 60 }, Now: clock})

	o.Phase("web1", "build", effects.PhaseStart, 0)
	o.Phase("web10", "build", effects.PhaseStart, 0)
	now = now.Add(3 * time.Second)
	o.Phase("web1", "build", effects.PhaseDone, 3*time.Second)
	o.Phase("web1", "push", effects.PhaseStart, 0)
	o.Copied("web1", 3*1024*1024/2)
	got := scr.lines()
	want := []string{
		"web1   3s     push ..., 1.5 MiB copied",
		"web10  3s     build ...",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("screen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	o.Log("web10", "error", "build: evaluation failed: "+strings.Repeat("x", 20))
	now = now.Add(2 * time.Second)
	o.Phase("web10", "build", effects.PhaseFailed, 5*time.Second)
	o.Verdict(verdict.Verdict{Node: "web10", ExitCode: 3, Reasons: []string{"build failed"}})
	o.Phase("web1", "switch", effects.PhaseStart, 0)
	o.Phase("web1", "switch", effects.PhaseStart, 0) // a redraw with nothing new
	o.Phase("web1", "some phase with a very long name that would wrap the terminal line", effects.PhaseStart, 0)
	got = scr.lines()
	n := len(got)
	if n < 4 || got[0] != "web10: build: evaluation failed: "+strings.Repeat("x", 20) {
		t.Fatalf("the log line is not above the block:\n%s", strings.Join(got, "\n"))
	}
	if !strings.HasPrefix(got[n-2], "web1   5s     some phase") || len(got[n-2]) != 59 {
		t.Errorf("web1's line %q: want it cut to 59 columns", got[n-2])
	}
	if got[n-1] != "web10  FAILED (exit 3) after 5s" {
		t.Errorf("web10's final line %q", got[n-1])
	}
	var vb strings.Builder
	_ = verdict.Verdict{Node: "web10", ExitCode: 3, Reasons: []string{"build failed"}}.WriteText(&vb)
	if block := strings.Join(got[1:n-2], "\n"); block != strings.TrimRight(vb.String(), "\n") {
		t.Errorf("the verdict block above the status lines:\n%s\nwant:\n%s", block, vb.String())
	}
	for _, l := range got {
		if strings.Contains(l, "build done") || strings.Contains(l, "switch ...") {
			t.Errorf("a finished phase left its own line: %q", l)
		}
	}

	now = now.Add(time.Second)
	o.Verdict(verdict.Verdict{Node: "web1", OK: true, ExitCode: 0})
	o.Summary(2, 1, 1, 3)
	got = scr.lines()
	n = len(got)
	if got[n-3] != "web1   ok after 6s, 1.5 MiB copied" || got[n-1] != "2 nodes: 1 ok, 1 failed (exit 3)" {
		t.Errorf("the end of the run:\n%s", strings.Join(got[n-3:], "\n"))
	}
}

// The elapsed time moves during a long phase: the block is redrawn on a tick.
func TestTerminalProgressTicks(t *testing.T) {
	scr := &screen{}
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	o := NewTextOn(scr, scr, &Terminal{Now: clock, Tick: 5 * time.Millisecond})
	o.Phase("web1", "push", effects.PhaseStart, 0)
	mu.Lock()
	now = now.Add(7 * time.Second)
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasPrefix(strings.Join(scr.lines(), "\n"), "web1  7s") {
		if time.Now().After(deadline) {
			t.Fatalf("no redraw with the new elapsed time: %q", scr.lines())
		}
		time.Sleep(5 * time.Millisecond)
	}
	o.Summary(1, 1, 0, 0)
	scr.mu.Lock()
	w := scr.writes
	scr.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	scr.mu.Lock()
	defer scr.mu.Unlock()
	if scr.writes != w {
		t.Errorf("the block is still redrawn after the summary")
	}
}

// Not a terminal: the prefixed lines as before, one per finished or failed phase, and
// no escape sequence.
func TestNotTerminalProgress(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o := NewTextOn(&stdout, &stderr, nil)
	o.Phase("web1", "build", effects.PhaseStart, 0)
	o.Phase("web1", "build", effects.PhaseDone, time.Second)
	o.Copied("web1", 10)
	o.Phase("web1", "push", effects.PhaseFailed, 2*time.Second)
	o.Log("web1", "error", "push: copy failed: connection reset")
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "web1: build done in 1s (") ||
		!strings.HasPrefix(lines[1], "web1: push failed after 2s (") || lines[2] != "web1: push: copy failed: connection reset" {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	if strings.Contains(stderr.String(), "\x1b") {
		t.Errorf("escape sequences off a terminal: %q", stderr.String())
	}

}

// A plan ends with what would change, not with an ok/failed count that reads as a
// failure (issue 33: "2 nodes: 0 ok, 2 failed (exit 0)" after `plan --offline`).
func TestPlanSummary(t *testing.T) {
	for _, c := range []struct {
		nodes, changed, failed, code int
		want                         string
	}{
		{2, 2, 0, 0, "2 nodes: 2 would be deployed, 0 unchanged (exit 0)\n"},
		{3, 1, 0, 0, "3 nodes: 1 would be deployed, 2 unchanged (exit 0)\n"},
		{3, 2, 1, 3, "3 nodes: 1 would be deployed, 1 unchanged, 1 could not be planned (exit 3)\n"},
		{1, 1, 0, 0, ""},
	} {
		var out strings.Builder
		NewTextOn(&out, io.Discard, nil).PlanSummary(c.nodes, c.changed, c.failed, c.code)
		if out.String() != c.want {
			t.Errorf("PlanSummary(%d, %d, %d, %d) = %q, want %q", c.nodes, c.changed, c.failed, c.code, out.String(), c.want)
		}
	}
}
