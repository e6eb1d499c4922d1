package console

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/verdict"
)

// Text is a run's text output (SPEC 2.2): live progress on stderr, the verdict blocks
// on stdout. On a terminal each node has one status line (phase, elapsed time, bytes copied when
// known), redrawn in place below everything else printed; otherwise each finished or
// failed phase is one appended line starting with the node's name, as scripts and logs
// want it.
type Text struct {
	mu     sync.Mutex
	stdout io.Writer
	stderr io.Writer
	term   *Terminal // nil: stderr is not a terminal
	block  *Block
	order  []string
	nodes  map[string]*nodeStatus
	// statusRows are the status verb's rows, printed as one table by Summary.
	statusRows []verdict.NodeStatus
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

// NewText is the text writer of a run, with status lines when stderr is a terminal.
func NewText(stdout, stderr io.Writer) *Text {
	return NewTextOn(stdout, stderr, Detect(stderr))
}

// NewTextOn is the text writer of a run on term (nil: stderr is not a terminal).
func NewTextOn(stdout, stderr io.Writer, term *Terminal) *Text {
	o := &Text{stdout: stdout, stderr: stderr, term: term, nodes: map[string]*nodeStatus{}}
	if term != nil {
		o.block = New(stderr, term, &o.mu, o.statusLines)
	}
	return o
}

func (o *Text) clock() time.Time {
	if o.term != nil {
		return o.term.Now()
	}
	return time.Now()
}

// node is the status of node, created at its first event.
func (o *Text) node(node string) *nodeStatus {
	n, ok := o.nodes[node]
	if !ok {
		n = &nodeStatus{started: o.clock(), copied: -1}
		o.nodes[node] = n
		o.order = append(o.order, node)
	}
	return n
}

func (o *Text) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
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
func (o *Text) Copied(node string, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.node(node).copied = bytes
	if o.block != nil {
		o.block.Redraw()
	}
}

// statusLines are the block's lines: each node's name padded to the widest, the time
// since its first event, its phase and where it is, and the bytes copied.
func (o *Text) statusLines() []string {
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
			line += ", " + Bytes(n.copied) + " copied"
		}
		lines = append(lines, line)
	}
	return lines
}

// above prints text above the status block, or just prints it off a terminal.
func (o *Text) above(w io.Writer, text string) {
	if o.block != nil {
		o.block.Above(w, text)
		return
	}
	fmt.Fprint(w, text)
}

func (o *Text) Log(node, level, msg string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// One line, starting with the node: "web1: push: copy failed: ...".
	if node != "" && !strings.HasPrefix(msg, node+": ") {
		msg = node + ": " + msg
	}
	o.above(o.stderr, strings.ReplaceAll(msg, "\n", " ")+"\n")
}

func (o *Text) Verdict(v verdict.Verdict) {
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
			n.final += ", " + Bytes(n.copied) + " copied"
		}
	}
	var b strings.Builder
	_ = v.WriteText(&b)
	o.above(o.stdout, b.String())
}

// Summary ends the run: the status block is drawn a last time and left where it is,
// and the count of several nodes follows it.
func (o *Text) Summary(nodes, ok, failed, exitCode int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.releaseBlock()
	if len(o.statusRows) > 0 {
		var b strings.Builder
		_ = verdict.WriteStatusTable(&b, o.statusRows)
		o.above(o.stdout, b.String())
		o.statusRows = nil
	}
	if nodes <= 1 {
		return
	}
	o.above(o.stdout, fmt.Sprintf("%d nodes: %d ok, %d failed (exit %d)\n", nodes, ok, failed, exitCode))
}

// releaseBlock draws the status block a last time and leaves it where it is.
func (o *Text) releaseBlock() {
	if o.block != nil {
		o.block.Release()
		o.order, o.nodes = nil, map[string]*nodeStatus{}
	}
}

// Status keeps one node's row of the status verb: Summary prints the table.
func (o *Text) Status(s verdict.NodeStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.statusRows = append(o.statusRows, s)
}

// Exec prints one node's answer to the exec verb: each line of its stdout on stdout and
// of its stderr on stderr, prefixed with the node's name (one node's lines stay
// together), then its exit status when it is not 0. A node's bytes are its own: control
// characters other than tab are shown as '?', so a node cannot drive the terminal.
func (o *Text) Exec(node string, exitCode int, stdout, stderr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if out := prefixLines(node, stdout); out != "" {
		o.above(o.stdout, out)
	}
	if exitCode != 0 {
		stderr += fmt.Sprintf("[exit %d]\n", exitCode)
	}
	if out := prefixLines(node, stderr); out != "" {
		o.above(o.stderr, out)
	}
}

// printable is a node's line with its control characters (but tab) shown as '?'.
func printable(line string) string {
	return strings.Map(func(r rune) rune {
		if r != '\t' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
			return '?'
		}
		return r
	}, line)
}

// prefixLines is text's lines, each after "node: ", control characters shown as '?'.
func prefixLines(node, text string) string {
	if text == "" {
		return ""
	}
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		b.WriteString(node + ": ")
		b.WriteString(printable(line))
		b.WriteByte('\n')
	}
	return b.String()
}

// PlanSummary ends a plan: how many nodes would change, in the plan's words.
func (o *Text) PlanSummary(nodes, changed, failed, exitCode int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.releaseBlock()
	if nodes <= 1 {
		return
	}
	line := fmt.Sprintf("%d nodes: %d would be deployed, %d unchanged", nodes, changed-failed, nodes-changed)
	if failed > 0 {
		line += fmt.Sprintf(", %d could not be planned", failed)
	}
	o.above(o.stdout, fmt.Sprintf("%s (exit %d)\n", line, exitCode))
}

func (o *Text) Plan(node, conf string, changed bool, would *effects.DryActivation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	what := "unchanged"
	if changed {
		what = "would be deployed"
	}
	text := fmt.Sprintf("%s: nixos_conf %s: %s\n", node, conf, what)
	if would != nil {
		for _, l := range would.Lines() {
			text += fmt.Sprintf("%s:   %s\n", node, printable(l)) // the unit names are the node's
		}
	}
	o.above(o.stdout, text)
}
