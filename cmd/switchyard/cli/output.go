package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

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
	term   *terminal // nil: stderr is not a terminal
	order  []string
	nodes  map[string]*nodeStatus
	drawn  int // status lines currently on the terminal
	ticker *time.Ticker
	stop   chan struct{}
}

// terminal is what the status block needs of the terminal on stderr.
type terminal struct {
	width func() int       // columns, 0 when unknown: lines longer than that would wrap and break the redraw
	now   func() time.Time // time.Now; a fixed clock in tests
	tick  time.Duration    // how often elapsed times are redrawn between events; 0: only on events
}

// nodeStatus is one node's status line.
type nodeStatus struct {
	started   time.Time // the node's first event
	phase     string
	state     effects.PhaseState
	phaseTook time.Duration // of the last finished or failed phase
	copied    int64         // bytes copied, -1 while not known
	finished  bool          // the verdict arrived: the line is final
	finalLine string
}

func newTextOutput(stdout, stderr io.Writer) *textOutput {
	return newTextOutputOn(stdout, stderr, detectTerminal(stderr))
}

func newTextOutputOn(stdout, stderr io.Writer, term *terminal) *textOutput {
	return &textOutput{stdout: stdout, stderr: stderr, term: term, nodes: map[string]*nodeStatus{}}
}

// detectTerminal is the terminal on w, or nil. A TIOCGWINSZ that succeeds means a
// terminal (a regular file, a pipe or /dev/null answer ENOTTY), and it gives the width.
func detectTerminal(w io.Writer) *terminal {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return nil
	}
	fd := int(f.Fd())
	if _, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err != nil {
		return nil
	}
	return &terminal{
		width: func() int {
			ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
			if err != nil {
				return 0
			}
			return int(ws.Col)
		},
		now:  time.Now,
		tick: time.Second,
	}
}

func (o *textOutput) clock() time.Time {
	if o.term != nil {
		return o.term.now()
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
	if o.term == nil {
		if state != effects.PhaseStart {
			fmt.Fprintln(o.stderr, line)
		}
		return
	}
	o.startTicker()
	o.redraw()
}

// Copied records how many bytes of the node's closure were copied so far; the status
// line shows it. The body reports it when the transport counts its copy.
func (o *textOutput) Copied(node string, bytes int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.node(node).copied = bytes
	if o.term != nil {
		o.redraw()
	}
}

// statusLine is a node's line in the block: its name padded to the block's widest, the
// phase and where it is, the time since the node's first event, and the bytes copied.
func (o *textOutput) statusLine(name string, pad int) string {
	n := o.nodes[name]
	if n.finished {
		return fmt.Sprintf("%-*s  %s", pad, name, n.finalLine)
	}
	total := o.term.now().Sub(n.started).Round(time.Second)
	var what string
	switch n.state {
	case effects.PhaseStart:
		what = n.phase + " ..."
	case effects.PhaseFailed:
		what = fmt.Sprintf("%s failed after %s", n.phase, n.phaseTook.Round(100*time.Millisecond))
	default:
		what = fmt.Sprintf("%s done", n.phase)
	}
	line := fmt.Sprintf("%-*s  %-6s %s", pad, name, total, what)
	if n.copied >= 0 {
		line += ", " + humanBytes(n.copied) + " copied"
	}
	return line
}

// humanBytes is n in binary units, as a person reads sizes.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// fit cuts line to the terminal's width: a wrapped line would take two rows and the
// cursor-up count of the next redraw would be off.
func (o *textOutput) fit(line string) string {
	w := 0
	if o.term.width != nil {
		w = o.term.width()
	}
	if w <= 1 || utf8.RuneCountInString(line) < w {
		return line
	}
	r := []rune(line)
	return string(r[:w-1])
}

// redraw rewrites the status block in place: up to its first line, each line cleared
// and written again.
func (o *textOutput) redraw() {
	if o.drawn > 0 {
		fmt.Fprintf(o.stderr, "\x1b[%dA", o.drawn)
	}
	pad := 0
	for _, name := range o.order {
		pad = max(pad, utf8.RuneCountInString(name))
	}
	for _, name := range o.order {
		fmt.Fprintf(o.stderr, "\r\x1b[K%s\n", o.fit(o.statusLine(name, pad)))
	}
	o.drawn = len(o.order)
}

// startTicker redraws the block every tick, so elapsed times move during a long
// phase; Summary stops it.
func (o *textOutput) startTicker() {
	if o.ticker != nil || o.term.tick <= 0 {
		return
	}
	o.ticker = time.NewTicker(o.term.tick)
	o.stop = make(chan struct{})
	go func(c <-chan time.Time, stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			case <-c:
				o.mu.Lock()
				if o.drawn > 0 {
					o.redraw()
				}
				o.mu.Unlock()
			}
		}
	}(o.ticker.C, o.stop)
}

func (o *textOutput) stopTicker() {
	if o.ticker != nil {
		o.ticker.Stop()
		close(o.stop)
		o.ticker = nil
	}
}

// above prints text above the status block: the block is erased, the text written,
// and the block drawn again below it.
func (o *textOutput) above(w io.Writer, text string) {
	if o.term != nil && o.drawn > 0 {
		fmt.Fprintf(o.stderr, "\x1b[%dA\x1b[J", o.drawn)
		o.drawn = 0
	}
	fmt.Fprint(w, text)
	if o.term != nil && len(o.order) > 0 {
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
	if o.term != nil {
		// The node's line becomes final: what was judged, and in how long.
		n := o.node(v.Node)
		n.finished = true
		took := o.term.now().Sub(n.started).Round(100 * time.Millisecond)
		if v.OK {
			n.finalLine = fmt.Sprintf("ok after %s", took)
		} else {
			n.finalLine = fmt.Sprintf("FAILED (exit %d) after %s", v.ExitCode, took)
		}
		if n.copied >= 0 {
			n.finalLine += ", " + humanBytes(n.copied) + " copied"
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
	if o.term != nil {
		o.stopTicker()
		if o.drawn > 0 {
			o.redraw()
		}
		o.drawn = 0 // what follows goes below the block
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
