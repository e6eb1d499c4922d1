package methods

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/evalcache"
	"github.com/switchyard-nix/switchyard/pool"
)

// evalBatch evaluates a run's nodes through the eval cache, the nodes the cache
// misses in a few Nix processes (plan.BatchEvalArgv, one per CPU), the first time any
// node is asked for (issue 14 item 1). Every node has its own nixos_conf, so the cache cannot share
// their evaluations; one nix-instantiate per node made sixteen processes at the start
// of a sixteen-node run, each reading switchyard's library, the tree's builder and
// nixpkgs again, before any node was contacted.
//
// A batch is an optimisation only: a node it did not give (it failed, since one
// node's error fails the whole batch, or it printed something else than one
// derivation per node) is evaluated on its own, as before, so an error is always
// that node's own. What the batch gives is stored in the cache, as an evaluation of
// the node would be, and reported as "evaluated"; a node's second evaluation in the
// same run is a cache hit.
type evalBatch struct {
	cache *evalcache.Cache
	nodes []*plan.Node
	// run evaluates argv (a batch command) in the evaluation's environment and
	// gives its standard output.
	run  func(ctx context.Context, argv []string) (string, error)
	cpus int // batches run at once
	// one evaluates a node the batches did not give, on its own (evaluate).
	one func(ctx context.Context, n *plan.Node) (string, string, error)

	once sync.Once
	mu   sync.Mutex
	got  map[string]batched // node name: what the batch gave, until the node takes it
}

// batched is what the batch learnt of one node: its derivation and how it was got
// ("eval cache hit" or "evaluated").
type batched struct{ drv, how string }

func newEvalBatch(cache *evalcache.Cache, nodes []*plan.Node) *evalBatch {
	return &evalBatch{cache: cache, nodes: nodes, cpus: runtime.NumCPU(),
		run: func(ctx context.Context, argv []string) (string, error) {
			return local(ctx, plan.EvalEnv(os.LookupEnv), argv)
		},
		one: func(ctx context.Context, n *plan.Node) (string, string, error) { return evaluate(ctx, cache, n) },
	}
}

// evaluate gives a node's toplevel derivation and how it was got ("eval cache hit",
// "evaluated"), as the package's evaluate does.
func (b *evalBatch) evaluate(ctx context.Context, n *plan.Node) (string, string, error) {
	b.once.Do(func() { b.fill(ctx) })
	b.mu.Lock()
	g, ok := b.got[n.Name]
	delete(b.got, n.Name)
	b.mu.Unlock()
	if ok {
		return g.drv, g.how, nil
	}
	return b.one(ctx, n)
}

// fill looks every node up in the cache and evaluates the ones it misses in
// batches (batchSizes), when there are two or more.
func (b *evalBatch) fill(ctx context.Context) {
	got := map[string]batched{}
	var missing []*plan.Node
	// A hit asks the store whether its derivation is still valid (one process each).
	hits := pool.Map(ctx, b.nodes, lookupWidth, func(_ context.Context, n *plan.Node) string {
		drv, _ := b.cache.Lookup(n.NixosConf)
		return drv
	})
	for i, n := range b.nodes {
		if hits[i] != "" {
			got[n.Name] = batched{hits[i], "eval cache hit"}
			continue
		}
		missing = append(missing, n)
	}
	if len(missing) >= 2 {
		var chunks [][]*plan.Node
		for _, size := range batchSizes(len(missing), b.cpus) {
			chunks, missing = append(chunks, missing[:size]), missing[size:]
		}
		results := pool.Map(ctx, chunks, b.cpus, func(ctx context.Context, nodes []*plan.Node) []string {
			drvs, err := b.batch(ctx, nodes)
			if err != nil {
				return nil
			}
			return drvs
		})
		for i, nodes := range chunks {
			for j, drv := range results[i] { // nil: the batch failed
				b.cache.Store(nodes[j].NixosConf, drv)
				got[nodes[j].Name] = batched{drv, "evaluated"}
			}
		}
	}
	b.mu.Lock()
	b.got = got
	b.mu.Unlock()
}

// lookupWidth bounds the cache lookups run at once.
const lookupWidth = 8

// batchCap bounds the nodes of one batch. A batch keeps what its nodes' evaluations
// hold until it ends, and one NixOS evaluation holds hundreds of MiB (colmena bounds
// its evaluations by node count for the same reason).
const batchCap = 8

// batchSizes splits n nodes into batches run side by side: at least one per CPU, as
// an evaluation is one process on one core (one batch of sixteen took as long as
// sixteen processes on two cores), of at most batchCap nodes each, and as even as
// possible.
func batchSizes(n, cpus int) []int {
	if n <= 0 {
		return nil
	}
	k := min(max(cpus, (n+batchCap-1)/batchCap, 1), n)
	sizes := make([]int, k)
	for i := range sizes {
		sizes[i] = n / k
		if i < n%k {
			sizes[i]++
		}
	}
	return sizes
}

// batch evaluates nodes in one nix-instantiate: one derivation per node, in order.
func (b *evalBatch) batch(ctx context.Context, nodes []*plan.Node) ([]string, error) {
	builds := make([]plan.Build, len(nodes))
	for i, n := range nodes {
		builds[i] = n.Build()
	}
	argv, err := plan.BatchEvalArgv(builds)
	if err != nil {
		return nil, err
	}
	out, err := b.run(ctx, argv)
	if err != nil {
		return nil, err
	}
	var drvs []string
	if err := json.Unmarshal([]byte(out), &drvs); err != nil {
		return nil, fmt.Errorf("batch evaluation: %w", err)
	}
	if len(drvs) != len(nodes) {
		return nil, fmt.Errorf("batch evaluation printed %d derivations for %d nodes", len(drvs), len(nodes))
	}
	for _, d := range drvs {
		if !filepath.IsAbs(d) || !strings.HasSuffix(d, ".drv") || strings.ContainsAny(d, "\n\x00") {
			return nil, fmt.Errorf("batch evaluation printed %q, not a derivation", d)
		}
	}
	return drvs, nil
}
