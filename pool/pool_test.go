package pool

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// Map keeps the order of its items and never runs more than width at once.
func TestMapBoundsAndOrders(t *testing.T) {
	items := make([]int, 40)
	for i := range items {
		items[i] = i
	}
	var now, most atomic.Int32
	got := Map(context.Background(), items, 3, func(_ context.Context, i int) int {
		n := now.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		now.Add(-1)
		return i * i
	})
	for i, r := range got {
		if r != i*i {
			t.Fatalf("result %d = %d, want %d", i, r, i*i)
		}
	}
	if m := most.Load(); m > 3 || m < 1 {
		t.Errorf("%d ran at once, want at most 3", m)
	}
}

// A cancelled context does not leave an item without its answer, even one
// waiting for a slot; a width below one is one.
func TestMapCancelledStillAnswersEveryItem(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := Map(ctx, []string{"a", "b", "c"}, 0, func(ctx context.Context, s string) string {
		return s + ":" + ctx.Err().Error()
	})
	for i, s := range []string{"a", "b", "c"} {
		if got[i] != s+":context canceled" {
			t.Errorf("item %d = %q", i, got[i])
		}
	}
}
