package provider

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/switchyard-nix/switchyard/rollout"
)

// EnvRollout holds a staged rollout (issue 14 item 2) for the provider, as JSON: node
// to its Step. switchyard sets it for the apply that carries the rollout; OpenTofu
// orders the stages itself (each node's deployment depends on the stage before it),
// and the provider holds a node whose stage before it did not pass.
const EnvRollout = "SWITCHYARD_ROLLOUT"

// Step is a node's place in a staged rollout.
type Step struct {
	Stage      string   `json:"stage"`                 // its stage: "the canary", "batch 2"
	After      []string `json:"after,omitempty"`       // the nodes of the stage before it
	AfterStage string   `json:"after_stage,omitempty"` // that stage's name
}

// rolloutSteps is EnvRollout read once: the provider process serves one OpenTofu
// run, whose environment does not change.
var rolloutSteps = sync.OnceValues(func() (map[string]Step, error) {
	raw := os.Getenv(EnvRollout)
	if raw == "" {
		return nil, nil
	}
	var steps map[string]Step
	if err := json.Unmarshal([]byte(raw), &steps); err != nil {
		return nil, fmt.Errorf("%s: %w", EnvRollout, err)
	}
	return steps, nil
})

// outcome is how a node's deploy ended in this run, for the stages after it.
type outcome struct {
	ok   bool
	held string // the reason it was held, "" when it was deployed
}

// outcomes is node to outcome, for this process's run: OpenTofu applies a whole
// rollout through one provider process, and a stage's deploys end before the next
// stage's start (depends_on), so the next stage reads them here.
var outcomes sync.Map

// heldBy is the reason a node of step is held: a node of the stage before it failed
// (or was held itself, whose reason it keeps: the stage where the rollout stopped).
// "" when every node before it passed or was not deployed in this run (OpenTofu left
// it alone: its state is what a previous run judged).
func heldBy(step Step) string {
	var failed []string
	for _, n := range step.After {
		o, found := outcomes.Load(n)
		if !found {
			continue
		}
		switch o := o.(outcome); {
		case o.held != "":
			return o.held
		case !o.ok:
			failed = append(failed, n)
		}
	}
	if len(failed) == 0 {
		return ""
	}
	return rollout.Held(step.AfterStage, failed)
}
