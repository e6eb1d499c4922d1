package effects

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// chainSample is the sample recorded on a test-bed node after the chain-oneshot
// closure's switch: prepare-secrets.service (a plain oneshot) ran and exited, and
// hello.service is up.
func chainSample(t *testing.T) verdict.Sample {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "chain-oneshot", "sample.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := verdict.ParseSample(raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChainCompute(t *testing.T) {
	members := []string{"prepare-secrets.service", "hello.service"}
	rec := chainSample(t)
	head := rec.Units["prepare-secrets.service"]
	if head.Type != "oneshot" || head.ActiveState != "inactive" || head.ExecMainStart < rec.Activated || rec.Activated == 0 {
		t.Fatalf("recorded head is not a oneshot that ran since the activation: %+v (activated %d)", head, rec.Activated)
	}
	tests := []struct {
		name                    string
		edit                    func(s *verdict.Sample, head *verdict.Unit)
		wantUp                  bool
		wantWaiting, wantFailed string
	}{
		{name: "recorded: the oneshot ran since the activation, the tail is up", wantUp: true},
		{name: "the oneshot ran before the activation", edit: func(s *verdict.Sample, h *verdict.Unit) { s.Activated = h.ExecMainStart + 1 },
			wantWaiting: "prepare-secrets.service"},
		{name: "activation time unknown", edit: func(s *verdict.Sample, h *verdict.Unit) { s.Activated = 0 },
			wantWaiting: "prepare-secrets.service"},
		{name: "RemainAfterExit=yes and inactive: not done", edit: func(s *verdict.Sample, h *verdict.Unit) { h.RemainAfterExit = true },
			wantWaiting: "prepare-secrets.service"},
		{name: "not a oneshot: an exited simple service is not done", edit: func(s *verdict.Sample, h *verdict.Unit) { h.Type = "simple" },
			wantWaiting: "prepare-secrets.service"},
		{name: "skipped by a condition: never ran", edit: func(s *verdict.Sample, h *verdict.Unit) {
			h.ExecMainStart, h.ExecMainExit, h.ExecMainCode, h.ExecMainStatus = 0, 0, 0, 0
		}, wantWaiting: "prepare-secrets.service"},
		{name: "still running", edit: func(s *verdict.Sample, h *verdict.Unit) {
			h.ActiveState, h.SubState, h.ExecMainExit = "activating", "start", 0
		}, wantWaiting: "prepare-secrets.service"},
		{name: "failed", edit: func(s *verdict.Sample, h *verdict.Unit) {
			h.ActiveState, h.SubState, h.Result, h.ExecMainStatus = "failed", "failed", "exit-code", 1
		}, wantWaiting: "prepare-secrets.service", wantFailed: "prepare-secrets.service"},
		{name: "the tail is absent", edit: func(s *verdict.Sample, h *verdict.Unit) { delete(s.Units, "hello.service") },
			wantWaiting: "hello.service"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := rec
			s.Units = map[string]verdict.Unit{}
			for k, v := range rec.Units {
				s.Units[k] = v
			}
			h := s.Units["prepare-secrets.service"]
			if tc.edit != nil {
				tc.edit(&s, &h)
			}
			s.Units["prepare-secrets.service"] = h
			d := chainCompute(members, s, nil)
			if d.up != tc.wantUp || d.waiting != tc.wantWaiting || d.failed != tc.wantFailed || !d.changed {
				t.Errorf("got up=%v waiting=%q failed=%q changed=%v; want up=%v waiting=%q failed=%q changed=true",
					d.up, d.waiting, d.failed, d.changed, tc.wantUp, tc.wantWaiting, tc.wantFailed)
			}
			if again := chainCompute(members, s, d.states); again.changed {
				t.Errorf("the same sample again reads as a change: %v -> %v", d.states, again.states)
			}
		})
	}
}

// unreachableChainNode declares a chain and then cannot be read: every sample's
// connection is refused after the wait phase got its answer.
type unreachableChainNode struct{ *fakeNode }

func (n unreachableChainNode) Run(ctx context.Context, c Command) (int, error) {
	switch {
	case len(c.Argv) == 3 && c.Argv[0] == "cat" && c.Argv[2] == "/run/current-system/etc/switchyard/chain":
		fmt.Fprintln(c.Stdout, "secret-agent.service")
		return 0, nil
	case len(c.Argv) == 3 && c.Argv[0] == "sh" && c.Argv[2] == verdict.ReadScript:
		n.record("run sh -c ReadScript")
		return 0, fmt.Errorf("dial: connection refused: %w", ErrUnreachable)
	}
	return n.fakeNode.Run(ctx, c)
}

// Issue 11 item 6: the chain gate that gives up on an unreachable node reports the
// node unreachable (reachable: false), exit 3, with no sweep.
func TestChainGateUnreachableNode(t *testing.T) {
	f := loadFake(t, "healthy")
	ev := &events{}
	d := &Deploy{Node: "web1", Transport: unreachableChainNode{f}, Config: testConfig(true), Reporter: ev, poll: time.Millisecond}
	res := d.Run(context.Background())
	if res.ExitCode != exitcode.Infra || res.Verdict.ExitCode != exitcode.Infra {
		t.Errorf("exit %d (verdict %d), want 3", res.ExitCode, res.Verdict.ExitCode)
	}
	if res.Verdict.Reachable {
		t.Errorf("verdict says reachable after the chain gate gave up on an unreachable node: %+v", res.Verdict)
	}
	if got := f.did("run sh -c ReadScript"); got != 3 {
		t.Errorf("read the node %d times, want 3", got)
	}
	if !strings.Contains(strings.Join(res.Verdict.Reasons, ";"), "chain: node unreachable while waiting for the chain") {
		t.Errorf("reasons %v", res.Verdict.Reasons)
	}
	for _, p := range ev.started() {
		if p == "sweep" {
			t.Errorf("the sweep ran although the chain is down: %v", ev.started())
		}
	}
}

// unreadableChainNode has a chain file that exists but cannot be read (cat fails, the
// file is there): the gate must not take that for "no chain declared".
type unreadableChainNode struct{ *fakeNode }

func (n unreadableChainNode) Run(ctx context.Context, c Command) (int, error) {
	switch {
	case len(c.Argv) == 3 && c.Argv[0] == "cat" && c.Argv[2] == "/run/current-system/etc/switchyard/chain":
		fmt.Fprintln(c.Stderr, "cat: /run/current-system/etc/switchyard/chain: Permission denied")
		return 1, nil
	case len(c.Argv) > 2 && c.Argv[0] == "test" && c.Argv[2] == "/run/current-system/etc/switchyard/chain":
		return 0, nil // it exists
	}
	return n.fakeNode.Run(ctx, c)
}

// A chain file that exists but cannot be read stops the node (exit 3, phase chain)
// before the sweep, reachable; only a missing file means no chain.
func TestChainGateUnreadableChainFile(t *testing.T) {
	f := loadFake(t, "healthy")
	ev := &events{}
	d := &Deploy{Node: "web1", Transport: unreadableChainNode{f}, Config: testConfig(true), Reporter: ev, poll: time.Millisecond}
	res := d.Run(context.Background())
	if res.ExitCode != exitcode.Infra || !res.Verdict.Reachable {
		t.Errorf("exit %d reachable %v, want 3 and reachable", res.ExitCode, res.Verdict.Reachable)
	}
	if !strings.Contains(strings.Join(res.Verdict.Reasons, ";"), "chain: reading the chain: cat exited 1: cat: /run/current-system/etc/switchyard/chain: Permission denied") {
		t.Errorf("reasons %v", res.Verdict.Reasons)
	}
	for _, p := range ev.started() {
		if p == "sweep" {
			t.Errorf("the sweep ran although the chain could not be read: %v", ev.started())
		}
	}
}
