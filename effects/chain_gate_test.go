package effects_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

// unreachableChainNode declares a chain and then cannot be read: every sample's
// connection is refused after the wait phase got its answer.
type unreachableChainNode struct{ *effectstest.Node }

func (n unreachableChainNode) Run(ctx context.Context, c effects.Command) (int, error) {
	argv := c.Argv
	if _, inner, ok := effectstest.Optional(argv); ok {
		argv = inner
	}
	switch {
	case len(argv) == 3 && argv[0] == "cat" && argv[2] == "/run/current-system/etc/switchyard/chain":
		fmt.Fprintln(c.Stdout, "secret-agent.service")
		return 0, nil
	case len(c.Argv) >= 3 && c.Argv[0] == "sh" && c.Argv[2] == verdict.ReadScript:
		n.Record("run sh -c ReadScript")
		return 0, fmt.Errorf("dial: connection refused: %w", effects.ErrUnreachable)
	}
	return n.Node.Run(ctx, c)
}

// Issue 11 item 6: the chain gate that gives up on an unreachable node reports the
// node unreachable (reachable: false), exit 3, with no sweep.
func TestChainGateUnreachableNode(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	ev := &effectstest.Events{}
	d := (&effects.Deploy{Node: "web1", Transport: unreachableChainNode{f}, Config: testConfig(true), Reporter: ev}).WithSeams(nil, time.Millisecond)
	res := d.Run(context.Background())
	if res.ExitCode != exitcode.Infra || res.Verdict.ExitCode != exitcode.Infra {
		t.Errorf("exit %d (verdict %d), want 3", res.ExitCode, res.Verdict.ExitCode)
	}
	if res.Verdict.Reachable {
		t.Errorf("verdict says reachable after the chain gate gave up on an unreachable node: %+v", res.Verdict)
	}
	if got := f.Did("run sh -c ReadScript"); got != 3 {
		t.Errorf("read the node %d times, want 3", got)
	}
	if !strings.Contains(strings.Join(res.Verdict.Reasons, ";"), "chain: node unreachable while waiting for the chain") {
		t.Errorf("reasons %v", res.Verdict.Reasons)
	}
	for _, p := range ev.Started() {
		if p == "sweep" {
			t.Errorf("the sweep ran although the chain is down: %v", ev.Started())
		}
	}
}

// unreadableChainNode has a chain file that exists but cannot be read (cat fails, the
// file is there): the gate must not take that for "no chain declared".
type unreadableChainNode struct{ *effectstest.Node }

func (n unreadableChainNode) Run(ctx context.Context, c effects.Command) (int, error) {
	argv := c.Argv
	if _, inner, ok := effectstest.Optional(argv); ok {
		argv = inner
	}
	switch {
	case len(argv) == 3 && argv[0] == "cat" && argv[2] == "/run/current-system/etc/switchyard/chain":
		fmt.Fprintln(c.Stderr, "cat: /run/current-system/etc/switchyard/chain: Permission denied")
		return 1, nil
	}
	return n.Node.Run(ctx, c)
}

// A chain file that exists but cannot be read stops the node (exit 3, phase chain)
// before the sweep, reachable; only a missing file means no chain.
func TestChainGateUnreadableChainFile(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	ev := &effectstest.Events{}
	d := (&effects.Deploy{Node: "web1", Transport: unreadableChainNode{f}, Config: testConfig(true), Reporter: ev}).WithSeams(nil, time.Millisecond)
	res := d.Run(context.Background())
	if res.ExitCode != exitcode.Infra || !res.Verdict.Reachable {
		t.Errorf("exit %d reachable %v, want 3 and reachable", res.ExitCode, res.Verdict.Reachable)
	}
	if !strings.Contains(strings.Join(res.Verdict.Reasons, ";"), "chain: reading the chain: cat exited 1: cat: /run/current-system/etc/switchyard/chain: Permission denied") {
		t.Errorf("reasons %v", res.Verdict.Reasons)
	}
	for _, p := range ev.Started() {
		if p == "sweep" {
			t.Errorf("the sweep ran although the chain could not be read: %v", ev.Started())
		}
	}
}
