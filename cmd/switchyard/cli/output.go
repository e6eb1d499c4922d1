package cli

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/verdict"
)

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
	Kind      string                 `json:"kind"`
	Node      string                 `json:"node"`
	NixosConf string                 `json:"nixos_conf"`
	Changed   bool                   `json:"changed"`
	Would     *effects.DryActivation `json:"would,omitempty"` // what a switch would do to its units
}

type execEvent struct {
	Kind     string `json:"kind"`
	Node     string `json:"node"`
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

type summaryEvent struct {
	Kind     string `json:"kind"`
	Nodes    int    `json:"nodes"`
	OK       int    `json:"ok"`
	Failed   int    `json:"failed"`
	ExitCode int    `json:"exit_code"`
	Changed  *int   `json:"changed,omitempty"` // the plan verb's: nodes that would be deployed
}

func (o *jsonOutput) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
	o.emit(phaseEvent{"phase", node, phase, string(state), elapsed.Milliseconds()})
}
func (o *jsonOutput) Log(node, level, msg string) { o.emit(logEvent{"log", node, level, msg}) }
func (o *jsonOutput) Verdict(v verdict.Verdict)   { o.emit(v) }
func (o *jsonOutput) Plan(node, conf string, changed bool, would *effects.DryActivation) {
	o.emit(planEvent{"plan", node, conf, changed, would})
}
func (o *jsonOutput) Status(s verdict.NodeStatus) { o.emit(s) }
func (o *jsonOutput) Exec(node string, exitCode int, stdout, stderr string) {
	o.emit(execEvent{"exec", node, exitCode, stdout, stderr})
}
func (o *jsonOutput) Summary(nodes, ok, failed, exitCode int) {
	o.emit(summaryEvent{"summary", nodes, ok, failed, exitCode, nil})
}

// PlanSummary: ok and failed count the nodes planned and those that could not be;
// changed, those that would be deployed.
func (o *jsonOutput) PlanSummary(nodes, changed, failed, exitCode int) {
	o.emit(summaryEvent{"summary", nodes, nodes - failed, failed, exitCode, &changed})
}
