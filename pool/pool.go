package pool

import (
	"context"
	"sync"
)

// Map calls do on every item, at most width at once (at least one), and returns
// the results in the order of items. One call's failure never stops the others:
// do reports it in its result. When ctx is cancelled while an item waits for a
// slot, do still runs for it at once, with the cancelled ctx, so that every item
// gets its own answer (a node reported cancelled, not left out).
func Map[T, R any](ctx context.Context, items []T, width int, do func(context.Context, T) R) []R {
	width = max(width, 1)
	results := make([]R, len(items))
	slots := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i, item := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
			}
			results[i] = do(ctx, item)
		}()
	}
	wg.Wait()
	return results
}
