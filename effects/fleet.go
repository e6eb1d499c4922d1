package effects

import (
	"context"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/pool"
)

// RunFleet runs the body on every node, at most parallel at once. One node's
// failure never stops the others: each gets its own verdict and exit code.
// Results come back in the order of deploys. body runs one node (nil: Deploy.Run;
// a runner's unit tests play the body's outcome instead).
func RunFleet(ctx context.Context, deploys []*Deploy, parallel int, body func(context.Context, *Deploy) Result) []Result {
	if body == nil {
		body = func(ctx context.Context, d *Deploy) Result { return d.Run(ctx) }
	}
	// A node cancelled while it waits for a slot runs at once: the body reports it.
	return pool.Map(ctx, deploys, parallel, body)
}

// ExitCode is a fleet's exit code: the highest of its nodes' (SPEC 2.1).
func ExitCode(results []Result) int {
	code := exitcode.OK
	for _, r := range results {
		code = max(code, r.ExitCode)
	}
	return code
}
