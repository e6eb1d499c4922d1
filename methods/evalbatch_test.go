package methods

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/nix/nixtest"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/coordinates"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/evalcache"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// treePlan plans and writes a test tree of the given nodes for the ssh method; broken
// names a node whose evaluation fails ("" none).
func treePlan(t *testing.T, broken string, nodes ...string) *plan.Plan {
	t.Helper()
	var spec plantest.Tree
	for i, n := range nodes {
		spec.Nodes = append(spec.Nodes, plantest.Node{Name: n, Host: "127.0.0.1", Port: 2200 + i})
	}
	dir := plantest.WriteTree(t, filepath.Join(t.TempDir(), "tree"), spec)
	if broken != "" {
		plantest.BreakNode(t, dir, broken)
	}
	return computePlan(t, dir, filepath.Join(t.TempDir(), "state"))
}

// replan plans p's tree again, into the same state dir, after a change to the tree.
func replan(t *testing.T, p *plan.Plan) *plan.Plan {
	t.Helper()
	return computePlan(t, p.Nodes[0].Build().Tree, p.Nodes[0].Build().StateDir)
}

func computePlan(t *testing.T, dir, stateDir string) *plan.Plan {
	t.Helper()
	def, err := definition.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := method.Lookup("ssh")
	d, err := merge.Merge(def, m, nil, merge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Compute(d, coordinates.Fixed(m.Coordinates, nil), plan.Options{StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(); err != nil {
		t.Fatal(err)
	}
	return p
}

// countingBatch is an evalBatch over a cache in a temporary directory, as on a
// machine of cpus CPUs, whose batch commands and evaluations of one node are
// counted.
func countingBatch(t *testing.T, p *plan.Plan, cpus int) (b *evalBatch, cache *evalcache.Cache, batches, alone *int) {
	cache = evalcache.Open(t.TempDir(), nil)
	b = newEvalBatch(cache, p.Nodes)
	b.cpus = cpus
	run, one := b.run, b.one
	batches, alone = new(int), new(int)
	var mu sync.Mutex
	b.run = func(ctx context.Context, argv []string) (string, error) {
		mu.Lock()
		*batches++
		mu.Unlock()
		return run(ctx, argv)
	}
	b.one = func(ctx context.Context, n *plan.Node) (string, string, error) {
		mu.Lock()
		*alone++
		mu.Unlock()
		return one(ctx, n)
	}
	return b, cache, batches, alone
}

// evaluateAll evaluates every node at once, as the bodies of a run do.
func evaluateAll(b *evalBatch, nodes []*plan.Node) (drvs, hows []string, errs []error) {
	drvs, hows, errs = make([]string, len(nodes)), make([]string, len(nodes)), make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			drvs[i], hows[i], errs[i] = b.evaluate(context.Background(), n)
		}()
	}
	wg.Wait()
	return drvs, hows, errs
}

// The nodes of a run are evaluated in one batch, to the derivations their own
// evaluations give; a node's second evaluation is a cache hit; a node already in the
// cache is not evaluated again.
func TestEvalBatch(t *testing.T) {
	nixtest.Require(t, "nix-instantiate", "nix-store")
	p := treePlan(t, "", "web1", "web2", "web3")
	each := map[string]string{}
	for _, n := range p.Nodes {
		drv, how, err := evaluate(context.Background(), evalcache.Open("", nil), n)
		if err != nil || how != "evaluated" {
			t.Fatalf("%s alone: %s, %v", n.Name, how, err)
		}
		each[n.Name] = drv
	}

	// One CPU: one batch of three; two: two batches, side by side.
	for cpus, want := range map[int]int{1: 1, 2: 2} {
		b, cache, batches, alone := countingBatch(t, p, cpus)
		drvs, hows, errs := evaluateAll(b, p.Nodes)
		for i, n := range p.Nodes {
			if errs[i] != nil || hows[i] != "evaluated" || drvs[i] != each[n.Name] {
				t.Errorf("%d CPUs: %s: %s %s, %v; alone it evaluates to %s", cpus, n.Name, hows[i], drvs[i], errs[i], each[n.Name])
			}
			if got, ok := cache.Lookup(n.NixosConf); !ok || got != each[n.Name] {
				t.Errorf("%d CPUs: %s: the cache holds %q (%v)", cpus, n.Name, got, ok)
			}
		}
		if *batches != want || *alone != 0 {
			t.Errorf("%d CPUs: %d batch evaluations and %d of one node, want %d and none", cpus, *batches, *alone, want)
		}
		if drv, how, err := b.evaluate(context.Background(), p.Nodes[0]); err != nil || how != "eval cache hit" || drv != each["web1"] {
			t.Errorf("%d CPUs: web1 again: %s %s, %v; want a cache hit", cpus, how, drv, err)
		}
	}

	// web2 cached: the batch evaluates web1 and web3 only, and web2 is a hit.
	b, cache, batches, alone := countingBatch(t, p, 1)
	cache.Store(p.Nodes[1].NixosConf, each["web2"])
	_, hows, errs := evaluateAll(b, p.Nodes)
	if got := strings.Join(hows, ", "); got != "evaluated, eval cache hit, evaluated" || errs[0] != nil || errs[1] != nil || errs[2] != nil {
		t.Errorf("with web2 cached: %s; %v", got, errs)
	}
	if *batches != 1 || *alone != 0 {
		t.Errorf("with web2 cached: %d batch evaluations and %d of one node, want 1 and none", *batches, *alone)
	}
}

// Nodes whose builder gives them one and the same derivation value (a fleet deploying
// one toplevel) get it from one batch, each node its line.
func TestEvalBatchSharedToplevel(t *testing.T) {
	nixtest.Require(t, "nix-instantiate", "nix-store")
	p := treePlan(t, "", "web1", "web2", "web3")
	tree := p.Nodes[0].Build().Tree
	// A tag of this run: the derivation is new to the store, so the batch must write it.
	tag := "shared" + strconv.FormatInt(time.Now().UnixNano(), 36)
	shared := "(import " + strconv.Quote(filepath.Join(testbed.RepoRoot(), "testbed", "closures")) + " { tag = \"" + tag + "\"; }).healthy"
	if err := os.WriteFile(filepath.Join(tree, "builder.nix"), []byte("let shared = "+shared+"; in { configuration, plan }: shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = replan(t, p)
	b, _, batches, alone := countingBatch(t, p, 1)
	drvs, hows, errs := evaluateAll(b, p.Nodes)
	for i, n := range p.Nodes {
		if errs[i] != nil || hows[i] != "evaluated" || drvs[i] != drvs[0] || !strings.HasSuffix(drvs[i], "-nixos-system-healthy-"+tag+".drv") {
			t.Errorf("%s: %s %s, %v", n.Name, hows[i], drvs[i], errs[i])
		}
	}
	if !evalcache.StoreValid(drvs[0]) {
		t.Errorf("%s is not valid in the store: the batch did not write it", drvs[0])
	}
	if *batches != 1 || *alone != 0 {
		t.Errorf("%d batch evaluations and %d of one node, want 1 and none", *batches, *alone)
	}
}

// A node that does not evaluate fails the batch; every node is then evaluated on its
// own, so the others get their derivations and the broken one its own error.
func TestEvalBatchBrokenNode(t *testing.T) {
	nixtest.Require(t, "nix-instantiate", "nix-store")
	p := treePlan(t, "web2", "web1", "web2", "web3")
	b, cache, batches, alone := countingBatch(t, p, 1)
	drvs, hows, errs := evaluateAll(b, p.Nodes)
	if *batches != 1 || *alone != 3 {
		t.Errorf("%d batch evaluations and %d of one node, want 1 and 3", *batches, *alone)
	}
	for i, n := range p.Nodes {
		if n.Name == "web2" {
			if errs[i] == nil || !strings.Contains(errs[i].Error(), "web2 is broken") {
				t.Errorf("web2: %s %s, %v; want its own error", hows[i], drvs[i], errs[i])
			}
			if _, ok := cache.Lookup(n.NixosConf); ok {
				t.Error("web2 is in the cache")
			}
			continue
		}
		if errs[i] != nil || hows[i] != "evaluated" || !strings.HasSuffix(drvs[i], ".drv") {
			t.Errorf("%s: %s %s, %v", n.Name, hows[i], drvs[i], errs[i])
		}
		if got, ok := cache.Lookup(n.NixosConf); !ok || got != drvs[i] {
			t.Errorf("%s: the cache holds %q (%v)", n.Name, got, ok)
		}
	}
}

func TestBatchSizes(t *testing.T) {
	for _, c := range []struct {
		n, cpus int
		want    []int
	}{
		{0, 2, nil},
		{1, 2, []int{1}},
		{3, 2, []int{2, 1}},
		{16, 2, []int{8, 8}},
		{16, 8, []int{2, 2, 2, 2, 2, 2, 2, 2}},
		{17, 2, []int{6, 6, 5}}, // at most batchCap each
		{40, 1, []int{8, 8, 8, 8, 8}},
		{5, 0, []int{5}}, // no CPU count: one batch
	} {
		if got := batchSizes(c.n, c.cpus); !slices.Equal(got, c.want) {
			t.Errorf("%d nodes, %d CPUs: %v, want %v", c.n, c.cpus, got, c.want)
		}
	}
}
