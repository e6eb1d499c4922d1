package effects

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 14 item 1: the bodies of a fleet sharing one toplevel ask the local store
// whether it is built once, not once per node; a derivation found not built is
// asked again.
func TestBuiltOutputAskedOncePerDerivation(t *testing.T) {
	var asked atomic.Int32
	builtNow := map[string]bool{"/nix/store/aaa-built.drv": true}
	var mu sync.Mutex
	saved := queryBuilt
	t.Cleanup(func() { queryBuilt = saved })
	queryBuilt = func(ctx context.Context, drv string) (string, bool) {
		asked.Add(1)
		time.Sleep(20 * time.Millisecond) // the others arrive while the first asks
		mu.Lock()
		defer mu.Unlock()
		if builtNow[drv] {
			return "/nix/store/out-" + drv[len("/nix/store/"):], true
		}
		return "", false
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	outs := make([]string, 16)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _ = builtOutput(ctx, "/nix/store/aaa-built.drv")
		}()
	}
	wg.Wait()
	if n := asked.Load(); n != 1 {
		t.Errorf("16 bodies asked the store %d times, want once", n)
	}
	for i, out := range outs {
		if out != "/nix/store/out-aaa-built.drv" {
			t.Errorf("body %d: output %q", i, out)
		}
	}

	asked.Store(0)
	if _, ok := builtOutput(ctx, "/nix/store/bbb-later.drv"); ok {
		t.Fatal("a derivation not built was reported built")
	}
	mu.Lock()
	builtNow["/nix/store/bbb-later.drv"] = true
	mu.Unlock()
	if out, ok := builtOutput(ctx, "/nix/store/bbb-later.drv"); !ok || out != "/nix/store/out-bbb-later.drv" {
		t.Errorf("after it was built: %q, %v; want it asked again and found", out, ok)
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("asked %d times, want twice (not built is not remembered)", n)
	}
}
