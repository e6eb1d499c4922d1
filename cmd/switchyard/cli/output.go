package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchyard-nix/switchyard/console"
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

// textOutput shows live progress on stderr and the verdict blocks on stdout (SPEC 2.2).
// On a terminal each node has one status line (phase, elapsed time, bytes copied when
// known), redrawn in place below everything else printed; otherwise each finished or
// failed phase is one appended line starting with the node's name, as scripts and logs
// want it.
type textOutput struct {
	mu     sync.Mutex
	stdout io.Writer
	stderr io.Writer
	term   *console.Terminal // nil: stderr is not a terminal
	block  *console.Block
	order  []string
	nodes  map[string]*nodeStatus
}

// nodeStatus is one node's status line.
type nodeStatus struct {
	started   time.Time // the node's first event
	phase     string
	state     effects.PhaseState
	phaseTook time.Duration // of the last finished or failed phase
	copied    int64         // bytes copied, -1 while not known
	final     string        // set when the verdict arrived: the line no longer moves
}

func newTextOutput(stdout, stderr io.Writer) *textOutput {
	return newTextOutputOn(stdout, stderr, console.Detect(stderr))
}

func newTextOutputOn(stdout, stderr io.Writer, term *console.Terminal) *textOutput {
	o := &textOutput{stdout: stdout, stderr: stderr, term: term, nodes: map[string]*nodeStatus{}}
	if term != nil {
		o.block = console.New(stderr, term, &o.mu, o.statusLines)
	}
	return o
}

func (o *textOutput) clock() time.Time {
	if o.term != nil {
		return o.term.Now()
	}
	return time.Now()
}

// node is the status of node, created at its first event.
func (o *textOutput) node(node string) *nodeStatus {
	n, ok := o.nodes[node]
	if !ok {
		n = &nodeStatus{started: o.clock(), copied: -1}
		o.nodes[node] = n
		o.order = append(o.order, node)
	}
	return n
}

func (o *textOutput) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := o.node(node)
	total := o.clock().Sub(n.started).Round(100 * time.Millisecond)
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
	n.phase, n.state, n.phaseTook = phase, state, elapsed
	if o.block != nil {
		o.block.Redraw()
	} else if state != effects.PhaseStart {
		fmt.Fprintln(o.stderr, line)
	}
}

// Copied records how many bytes of the node's closure were copied so far; the status
// line shows it. The body reports it when the transport counts its copy.
func (o *textOutput) Copied(node string, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.node(node).copied = bytes
	if o.block != nil {
		o.block.Redraw()
	}
}

// statusLines are the block's lines: each node's name padded to the widest, the time
// since its first event, its phase and where it is, and the bytes copied.
func (o *textOutput) statusLines() []string {
	pad := 0
	for _, name := range o.order {
		pad = max(pad, utf8.RuneCountInString(name))
	}
	lines := make([]string, 0, len(o.order))
	for _, name := range o.order {
		n := o.nodes[name]
		if n.final != "" {
			lines = append(lines, fmt.Sprintf("%-*s  %s", pad, name, n.final))
			continue
		}
		what := n.phase + " done"
		switch n.state {
		case effects.PhaseStart:
			what = n.phase + " ..."
		case effects.PhaseFailed:
			what = fmt.Sprintf("%s failed after %s", n.phase, n.phaseTook.Round(100*time.Millisecond))
		}
		line := fmt.Sprintf("%-*s  %-6s %s", pad, name, o.clock().Sub(n.started).Round(time.Second), what)
		if n.copied >= 0 {
			line += ", " + console.Bytes(n.copied) + " copied"
		}
		lines = append(lines, line)
	}
	return lines
}

// above prints text above the status block, or just prints it off a terminal.
func (o *textOutput) above(w io.Writer, text string) {
	if o.block != nil {
		o.block.Above(w, text)
		return
	}
	fmt.Fprint(w, text)
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
	if o.block != nil {
		// The node's line becomes final: what was judged, and in how long.
		n := o.node(v.Node)
		took := o.clock().Sub(n.started).Round(100 * time.Millisecond)
		n.final = fmt.Sprintf("FAILED (exit %d) after %s", v.ExitCode, took)
		if v.OK {
			n.final = fmt.Sprintf("ok after %s", took)
		}
		if n.copied >= 0 {
			n.final += ", " + console.Bytes(n.copied) + " copied"
		}
	}
	var b strings.Builder
	_ = v.WriteText(&b)
	o.above(o.stdout, b.String())
}

// Summary ends the run: the status block is drawn a last time and left where it is,
// and the count of several nodes follows it.
func (o *textOutput) Summary(nodes, ok, failed, exitCode int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.block != nil {
		o.block.Release()
		o.order, o.nodes = nil, map[string]*nodeStatus{}
	}
	if nodes <= 1 {
		return
	}
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
