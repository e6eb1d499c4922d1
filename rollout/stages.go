package rollout

import (
	"fmt"
	"strings"
)

// Stage is one step of a rollout: its nodes are deployed together, and the next
// stage starts only when every one of them passed its verdict.
type Stage struct {
	Batch int      // 0 is the canary, then 1, 2, ...
	Nodes []string // in the fleet's order
}

// String names the stage as the held nodes' reason does: "the canary", "batch 2".
func (s Stage) String() string {
	if s.Batch == 0 {
		return "the canary"
	}
	return fmt.Sprintf("batch %d", s.Batch)
}

// Stages splits nodes (in plan order) by spec. Only the nodes changed reports true
// for count toward the canary and the batches; the others already run their
// generation and go with the first stage, which judges them at no risk. Without a
// spec, or without a changed node, there is one stage of every node. No stage is
// empty.
func Stages(nodes []string, changed map[string]bool, spec Spec) []Stage {
	if !spec.Enabled() {
		return []Stage{{Batch: 1, Nodes: append([]string(nil), nodes...)}}
	}
	var moving, still []string
	for _, n := range nodes {
		if changed[n] {
			moving = append(moving, n)
		} else {
			still = append(still, n)
		}
	}
	var stages []Stage
	canary := min(spec.Canary, len(moving))
	if canary > 0 {
		stages = append(stages, Stage{Batch: 0, Nodes: moving[:canary:canary]})
	}
	rest := moving[canary:]
	size := len(rest)
	switch {
	case spec.Percent:
		size = max(1, (len(rest)*spec.Batch+99)/100) // rounded up
	case spec.Batch > 0:
		size = spec.Batch
	}
	for i := 0; i < len(rest); i += size {
		stages = append(stages, Stage{Batch: len(stages) + 1 - min(canary, 1), Nodes: rest[i:min(i+size, len(rest)):min(i+size, len(rest))]})
	}
	if len(stages) == 0 {
		return []Stage{{Batch: 1, Nodes: still}}
	}
	// The unchanged nodes join the first stage, keeping the fleet's order.
	first := map[string]bool{}
	for _, n := range stages[0].Nodes {
		first[n] = true
	}
	for _, n := range still {
		first[n] = true
	}
	stages[0].Nodes = nil
	for _, n := range nodes {
		if first[n] {
			stages[0].Nodes = append(stages[0].Nodes, n)
		}
	}
	return stages
}

// Failed is the nodes of a stage whose exit code (in codes) is not 0, in the stage's
// order: when there is any, the rollout stops after this stage.
func Failed(s Stage, codes map[string]int) []string {
	var failed []string
	for _, n := range s.Nodes {
		if codes[n] != 0 {
			failed = append(failed, n)
		}
	}
	return failed
}

// HeldReason is the reason of a node the rollout did not reach because it stopped
// at s, where failed failed: "held: the rollout stopped at batch 2 (web3 failed)".
func HeldReason(s Stage, failed []string) string { return Held(s.String(), failed) }

// Held is HeldReason for the stage named stage ("the canary", "batch 2").
func Held(stage string, failed []string) string {
	return fmt.Sprintf("held: the rollout stopped at %s (%s failed)", stage, strings.Join(failed, ", "))
}
