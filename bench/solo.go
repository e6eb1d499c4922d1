package main

// (g)'s reference for the test bed's own queue (issue 35 item 1). The nodes are
// containers on the deployer's cores, so a fleet's wall time grows with the CPU its
// nodes burn whatever the deployer does. To tell the two apart, every row of more than
// one node also deploys a third generation to the same nodes, each node by its own
// one-node `switchyard ssh apply`, all started at once: the nodes do the same work on
// the same cores, but no one deployer process serves them all. The fleet's wall against
// that reference's (its slowest process) is what the one process adds: its queue, not
// the test bed's. The reference does more deployer work than the fleet (one process and
// one evaluation per node), which the table prints beside it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// soloResult is one reference run.
type soloResult struct {
	wall     time.Duration // from the common start to the last process's exit
	cpu      time.Duration // the processes' CPU (user+sys, with their children), summed
	nodesCPU time.Duration // the nodes' own CPU over it
	busy     float64       // the machine's busy share over it
}

// soloRef deploys builder's generation to every node of spec (the instances, in the
// same order), each by its own one-node ssh apply with windows win, all at once.
func soloRef(ctx context.Context, bed *testbed.Bed, dir, binary, builder string, spec plantest.Tree, instances []string, win windows, label string) (soloResult, error) {
	trees := make([]string, len(spec.Nodes))
	for i, nd := range spec.Nodes {
		trees[i] = filepath.Join(dir, nd.Name, "tree")
		if err := plantest.Write(trees[i], plantest.Tree{Nodes: []plantest.Node{nd}}); err != nil {
			return soloResult{}, err
		}
		if err := os.WriteFile(filepath.Join(trees[i], "builder.nix"), []byte(builder), 0o644); err != nil {
			return soloResult{}, err
		}
	}
	if err := warmEvaluations(ctx, bed, binary, trees, win); err != nil {
		return soloResult{}, err
	}
	waited, quiet := waitQuiet(instances)
	fmt.Fprintf(os.Stderr, "bench: (g) ssh, %d nodes: waited %s for the nodes to go quiet (quiet: %v); one ssh apply per node, all at once\n", len(instances), waited.Round(time.Second), quiet)
	stopCPU := make(chan struct{})
	start := time.Now()
	cpuSamples := sampleCPU(instances, start, stopCPU)
	results := make([]fleetResult, len(spec.Nodes))
	errs := make([]error, len(spec.Nodes))
	var wg sync.WaitGroup
	for i, nd := range spec.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fleetApply(ctx, bed, filepath.Dir(trees[i]), binary, "", trees[i], "ssh", win, 1)
			results[i], errs[i] = timedApply(cmd)
			writeEvents(label+"-solo-"+nd.Name, results[i])
			if errs[i] == nil {
				errs[i] = tfCheck(eventLines(results[i]), plantest.Tree{Nodes: []plantest.Node{nd}}, false)
			}
		}()
	}
	wg.Wait()
	res := soloResult{wall: time.Since(start)}
	close(stopCPU)
	names := make([]string, len(spec.Nodes))
	for i, nd := range spec.Nodes {
		names[i] = nd.Name
	}
	c := splitCPU(<-cpuSamples, names, nil)
	res.nodesCPU, res.busy = c.total, c.busy
	for i, r := range results {
		if errs[i] != nil {
			return res, fmt.Errorf("%s's own ssh apply: %w", spec.Nodes[i].Name, errs[i])
		}
		res.cpu += r.cpu
	}
	return res, nil
}

// warmEvaluations fills every reference process's eval cache with an untimed
// `ssh plan --offline` of its tree, all at once: the fleet evaluates its nodes in one
// batch, and n evaluations of one node each would slow the reference by deployer work
// the fleet does not do, flattering the fleet. The reference then evaluates nothing,
// which makes the figure err the other way: against the fleet.
func warmEvaluations(ctx context.Context, bed *testbed.Bed, binary string, trees []string, win windows) error {
	errs := make([]error, len(trees))
	var wg sync.WaitGroup
	for i, tree := range trees {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := fleetApply(ctx, bed, filepath.Dir(tree), binary, "", tree, "ssh", win, 1)
			cmd.Args[2] = "plan"
			cmd.Args = append(cmd.Args, "--offline")
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%s: the untimed plan: %v: %s", tree, err, lastLine(string(out)))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// medianSolo is the median of the runs' references by wall time (the lower middle of
// an even count); ok is false when no run measured one.
func medianSolo(runs []soloResult) (soloResult, bool) {
	if len(runs) == 0 {
		return soloResult{}, false
	}
	sorted := slices.Clone(runs)
	slices.SortStableFunc(sorted, func(a, b soloResult) int { return int(a.wall - b.wall) })
	return sorted[(len(sorted)-1)/2], true
}

// printSolo prints, per row that measured it, the fleet's wall against its reference's.
func printSolo(w io.Writer, results []fleetResult) {
	header := false
	for _, r := range results {
		s, ok := medianSolo(r.solos)
		if !ok {
			continue
		}
		if !header {
			fmt.Fprintln(w, "\nthe test bed's queue: the same nodes, a third generation of the same shape, each node by its own one-node ssh apply, all started at once (medians, like the rows)")
			fmt.Fprintln(w, "method\twindows\tnodes\tone process\tone per node: slowest\tratio\tdeployer CPU: one process\tone per node\tthe nodes' CPU: one process\tone per node\tbusy: one process\tone per node")
			header = true
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%.0f%%\t%.0f%%\n", r.method, r.windows.name, r.nodes, dur(r.wall), dur(s.wall), ratio(r.wall, s.wall),
			dur(r.cpu), dur(s.cpu), dur(r.nodeCPU.total), dur(s.nodesCPU), 100*r.nodeCPU.busy, 100*s.busy)
	}
}
