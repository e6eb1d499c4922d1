package methods

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/verdict"
)

// fakeReporter records a run's events.
type fakeReporter struct {
	mu       sync.Mutex
	logs     []string
	verdicts []verdict.Verdict
	plans    map[string]bool // node to changed
	summary  []int           // nodes, ok, failed, exit code
}

func (r *fakeReporter) Phase(string, string, effects.PhaseState, time.Duration) {}
func (r *fakeReporter) Log(node, level, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, level+" "+msg)
}
func (r *fakeReporter) Verdict(v verdict.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verdicts = append(r.verdicts, v)
}
func (r *fakeReporter) Plan(node, _ string, changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.plans == nil {
		r.plans = map[string]bool{}
	}
	r.plans[node] = changed
}
func (r *fakeReporter) Summary(nodes, ok, failed, exitCode int) {
	r.summary = []int{nodes, ok, failed, exitCode}
}

// fakeTransport is a node that answers readlink -f /run/current-system with current,
// or with err when set.
type fakeTransport struct {
	current string
	err     error
}

func (t *fakeTransport) Target() string { return "fake" }
func (t *fakeTransport) Run(_ context.Context, c effects.Command) (int, error) {
	if t.err != nil {
		return -1, t.err
	}
	if strings.Join(c.Argv, " ") != "readlink -f /run/current-system" {
		return 127, fmt.Errorf("fake node: unexpected command %q", c.Argv)
	}
	if c.Stdout != nil {
		io.WriteString(c.Stdout, t.current+"\n")
	}
	return 0, nil
}
func (t *fakeTransport) CopyClosure(context.Context, []string) error {
	return errors.New("fake node: no copy")
}
func (t *fakeTransport) SwitchRuntimeMaxArgs() []string { return nil }
func (t *fakeTransport) FinalizeBootloader(context.Context, string) error {
	return errors.New("fake node")
}
func (t *fakeTransport) RevertBootloader(context.Context) error { return errors.New("fake node") }
func (t *fakeTransport) Close() error                           { return nil }

// testPlan is a merged deployment of method name and its planned nodes, over ssh or
// Incus as the method reaches them, without a tree.
func testPlan(name string, settings map[string]any, nodes ...string) (*merge.Deployment, *plan.Plan) {
	m, _ := method.Lookup(name)
	s := m.Defaults()
	for k, v := range settings {
		s[k] = v
	}
	d := &merge.Deployment{Method: m, Settings: s, Hash: merge.Hash([]byte(`{"x":1}`))}
	p := &plan.Plan{Deployment: d}
	for i, n := range nodes {
		pn := &plan.Node{Name: n, Group: "web", NixosConf: fmt.Sprintf("%064x", i+1)}
		pn.Plan.Coordinates = map[string]string{}
		if m.Transport == method.Incus {
			pn.Plan.Incus = &definition.Incus{Image: "img"}
		} else {
			pn.Plan.SSH = &definition.SSH{Host: "127.0.0.1", Port: int64(2200 + i), User: "root"}
		}
		p.Nodes = append(p.Nodes, pn)
	}
	return d, p
}
