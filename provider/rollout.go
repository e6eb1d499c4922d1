package provider

import (
	"sync"

	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/rollout"
)

// Step is a node's place in a staged rollout (issue 14 item 2): the run's
// contract.Run.Rollout.
type Step = contract.Step

// outcome is how a node's deploy ended in this run, for the stages after it.
type outcome struct {
	ok   bool
	held string // the reason it was held, "" when it was deployed
}

// heldBy is the reason a node of step is held: a node of the stage before it failed
// (or was held itself, whose reason it keeps: the stage where the rollout stopped).
// "" when every node before it passed or was not deployed in this run (OpenTofu left
// it alone: its state is what a previous run judged).
func heldBy(step Step, outcomes *sync.Map) string {
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
