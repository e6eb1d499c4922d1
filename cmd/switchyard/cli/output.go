package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/verdict"
)

// Output is a Reporter that also ends the run with a summary.
type Output interface {
	effects.Reporter
	Summary(nodes, ok, failed, exitCode int)
	// Plan reports what the plan verb found for a node.
	Plan(node, nixosConf string, changed bool)
}

// jsonOutput writes JSON Lines on stdout, one object per event and nothing else.
type jsonOutput struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newJSONOutput(w io.Writer) *jsonOutput { return &jsonOutput{enc: json.NewEncoder(w)} }

func (o *jsonOutput) emit(v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.enc.Encode(v)
}

type phaseEvent struct {
	Kind      string `json:"kind"`
	Node      string `json:"node"`
	Phase     string `json:"phase"`
	State     string `json:"state"`
	ElapsedMS int64  `json:"elapsed_ms"`
}

type logEvent struct {
	Kind  string `json:"kind"`
	Node  string `json:"node"`
	Level string `json:"level"`
	Msg   string `json:"msg"`
}

type planEvent struct {
	Kind      string `json:"kind"`
	Node      string `json:"node"`
	NixosConf string `json:"nixos_conf"`
	Changed   bool   `json:"changed"`
}

type summaryEvent struct {
	Kind     string `json:"kind"`
	Nodes    int    `json:"nodes"`
	OK       int    `json:"ok"`
	Failed   int    `json:"failed"`
	ExitCode int    `json:"exit_code"`
}

func (o *jsonOutput) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
	o.emit(phaseEvent{"phase", node, phase, string(state), elapsed.Milliseconds()})
}
func (o *jsonOutput) Log(node, level, msg string) { o.emit(logEvent{"log", node, level, msg}) }
func (o *jsonOutput) Verdict(v verdict.Verdict)   { o.emit(v) }
func (o *jsonOutput) Plan(node, conf string, changed bool) {
	o.emit(planEvent{"plan", node, conf, changed})
}
func (o *jsonOutput) Summary(nodes, ok, failed, exitCode int) {
	o.emit(summaryEvent{"summary", nodes, ok, failed, exitCode})
}

// textOutput shows live progress on stderr, one line per node (redrawn in place on
// a terminal, appended otherwise), and the verdict blocks on stdout.
type textOutput struct {
	mu       sync.Mutex
	stdout   io.Writer
	stderr   io.Writer
	terminal bool
	order    []string
	lines    map[string]string
	started  map[string]time.Time
	drawn    int // progress lines currently on the terminal
}

func newTextOutput(stdout, stderr io.Writer) *textOutput {
	return &textOutput{stdout: stdout, stderr: stderr, terminal: isTerminal(stderr),
		lines: map[string]string{}, started: map[string]time.Time{}}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

func (o *textOutput) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.started[node]; !ok {
		o.started[node] = time.Now()
		o.order = append(o.order, node)
	}
	total := time.Since(o.started[node]).Round(100 * time.Millisecond)
	var line string
	switch state {
	case effects.PhaseStart:
		line = fmt.Sprintf("%s: %s ... (%s)", node, phase, total)
	case effects.PhaseFailed:
		line = fmt.Sprintf("%s: %s failed after %s (%s)", node, phase, elapsed.Round(time.Millisecond), total)
	case effects.PhaseDone:
		line = fmt.Sprintf("%s: %s done in %s (%s)", node, phase, elapsed.Round(time.Millisecond), total)
	default:
		return
	}
	o.lines[node] = line
	if o.terminal {
		o.redraw()
	} else if state != effects.PhaseStart {
		fmt.Fprintln(o.stderr, line)
	}
}

// redraw rewrites the progress block in place.
func (o *textOutput) redraw() {
	if o.drawn > 0 {
		fmt.Fprintf(o.stderr, "\x1b[%dA", o.drawn)
	}
	for _, n := range o.order {
		fmt.Fprintf(o.stderr, "\r\x1b[K%s\n", o.lines[n])
	}
	o.drawn = len(o.order)
}

// above prints text above the progress block.
func (o *textOutput) above(w io.Writer, text string) {
	if o.terminal && o.drawn > 0 {
		fmt.Fprintf(o.stderr, "\x1b[%dA\x1b[J", o.drawn)
		o.drawn = 0
	}
	fmt.Fprint(w, text)
	if o.terminal {
		o.redraw()
	}
}

func (o *textOutput) Log(node, level, msg string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// One line, starting with the node: "web1: push: copy failed: ...".
	if node != "" && !strings.HasPrefix(msg, node+": ") {
		msg = node + ": " + msg
	}
	o.above(o.stderr, strings.ReplaceAll(msg, "\n", " ")+"\n")
}

func (o *textOutput) Verdict(v verdict.Verdict) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	_ = v.WriteText(&b)
	o.above(o.stdout, b.String())
}

func (o *textOutput) Summary(nodes, ok, failed, exitCode int) {
	if nodes <= 1 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.above(o.stdout, fmt.Sprintf("%d nodes: %d ok, %d failed (exit %d)\n", nodes, ok, failed, exitCode))
}

func (o *textOutput) Plan(node, conf string, changed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	what := "unchanged"
	if changed {
		what = "would be deployed"
	}
	o.above(o.stdout, fmt.Sprintf("%s: nixos_conf %s: %s\n", node, conf, what))
}
