package effects

import (
	"context"
	"sync"
)

// RunFleet runs the body on every node, at most parallel at once. One node's
// failure never stops the others: each gets its own verdict and exit code.
// Results come back in the order of deploys.
func RunFleet(ctx context.Context, deploys []*Deploy, parallel int) []Result {
	if parallel < 1 {
		parallel = 1
	}
	results := make([]Result, len(deploys))
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, d := range deploys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				// Cancelled while waiting: the body reports the node at once.
			}
			results[i] = d.Run(ctx)
		}()
	}
	wg.Wait()
	return results
}

// ExitCode is a fleet's exit code: the highest of its nodes' (SPEC 2.1).
func ExitCode(results []Result) int {
	code := 0
	for _, r := range results {
		code = max(code, r.ExitCode)
	}
	return code
}
