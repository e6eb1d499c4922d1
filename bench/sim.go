package main

// (s): a simulated fleet (issue 35 item 3), so the deployer's cost's growth with the
// fleet is a number: the deploy body of every node, in one process, run by
// effects.RunFleet as the runners run it, against fake nodes answering from systemd
// state recorded on test-bed nodes (effects/effectstest playing
// verdict/testdata/healthy). No container, no ssh and no copy: what it measures is
// the deployer's own work per node (its goroutines, the lock's verbs, parsing the
// samples, the verdict, the text report) and its memory, with short windows
// (3 x 1 s). Each fleet runs in its own process (sim-child), whose rusage gives its
// CPU time and peak RSS.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/switchyard-nix/switchyard/console"
	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
)

var (
	simSizesArg = flag.String("sim-sizes", "1,50,200", "(s): the simulated fleets' node counts, comma-separated (\"\": none)")
	simOnly     = flag.Bool("sim-only", false, "measure (s) only (needs no test bed)")
)

// simScenario is the recording every simulated node plays.
const simScenario = "healthy"

// simWindows are the simulated deploys' verdict windows.
var simWindows = shortWindows

// simResult is one simulated fleet.
type simResult struct {
	nodes int
	wall  time.Duration
	cpu   time.Duration // user+sys of the process
	rss   int64
}

// simSizes are -sim-sizes' node counts.
func simSizes() ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(*simSizesArg, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sim-sizes: %q is not a node count", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// simRows runs a simulated fleet of each size; toplevel is a local store path the
// bodies deploy (the body's build phase checks it exists).
func simRows(self, toplevel string, sizes []int) ([]simResult, error) {
	var out []simResult
	for _, n := range sizes {
		cmd := exec.Command(self, "sim-child", "-nodes", strconv.Itoa(n), "-toplevel", toplevel)
		if *profileDir != "" {
			cmd.Args = append(cmd.Args, "-heap", filepath.Join(*profileDir, fmt.Sprintf("sim-%d.heap.pprof", n)))
		}
		cmd.Env = append(os.Environ(), simWindows.env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		err := cmd.Run()
		r := simResult{nodes: n, wall: time.Since(start)}
		if err != nil {
			return nil, fmt.Errorf("(s) %d nodes: %v: %s", n, err, lastLine(stderr.String()))
		}
		r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.rss = ru.Maxrss * 1024
		}
		fmt.Fprintf(os.Stderr, "bench: (s) %d simulated nodes: %s\n", n, dur(r.wall))
		out = append(out, r)
	}
	return out, nil
}

// printSim prints the simulated fleets: per size the deployer's CPU and peak RSS, in
// total and per node, and what each node above the smallest fleet added.
func printSim(w io.Writer, rows []simResult) error {
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\n(s) simulated fleet: the deploy body of every node in one process (effects.RunFleet, all at once), against fake nodes playing the recorded %q systemd state; %s; no ssh, no copy\n", simScenario, simWindows)
	fmt.Fprintln(tw, "nodes\twall\tCPU (user+sys)\tCPU per node\tpeak RSS\tRSS per node\tadded per node vs the smallest fleet: CPU\tRSS")
	base := rows[0]
	for _, r := range rows {
		dc, dr := "-", "-"
		if extra := r.nodes - base.nodes; extra > 0 {
			dc = dur((r.cpu - base.cpu) / time.Duration(extra))
			dr = kib((r.rss - base.rss) / int64(extra))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.nodes, dur(r.wall), dur(r.cpu), dur(r.cpu/time.Duration(r.nodes)),
			mib(r.rss), kib(r.rss/int64(r.nodes)), dc, dr)
	}
	return tw.Flush()
}

func kib(n int64) string { return fmt.Sprintf("%d KiB", n>>10) }

// simChild runs one simulated fleet: -nodes fake nodes, each deployed -toplevel.
// It exits 1 when a node's verdict is not a healthy one.
func simChild(args []string) int {
	fs := flag.NewFlagSet("sim-child", flag.ExitOnError)
	nodes := fs.Int("nodes", 1, "")
	top := fs.String("toplevel", "", "")
	heap := fs.String("heap", "", "")
	_ = fs.Parse(args)
	if *heap != "" {
		stop := largestHeap(*heap)
		defer stop()
	}
	rec, err := effectstest.LoadRecording(simScenario)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, err := effects.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// One reporter for the fleet, as a runner has: the text output, thrown away.
	rep := console.NewText(io.Discard, io.Discard)
	deploys := make([]*effects.Deploy, *nodes)
	for i := range deploys {
		// Each node its own fake; the recorded samples are shared, read only.
		fake := &effectstest.Node{Samples: rec.Samples, Toplevel: *top, Owned: rec.Owned, Wanted: rec.Wanted,
			Activates: true, Current: rec.Current, BootInit: *top + "/init"}
		deploys[i] = &effects.Deploy{Node: fmt.Sprintf("sim%03d", i+1), Transport: fake,
			Source: effects.Source{Toplevel: *top}, Config: cfg, Reporter: rep}
	}
	results := effects.RunFleet(context.Background(), deploys, *nodes, nil)
	code := 0
	for i, r := range results {
		if r.ExitCode != 0 || !r.Verdict.OK {
			fmt.Fprintf(os.Stderr, "%s: exit %d: %s\n", deploys[i].Node, r.ExitCode, strings.Join(r.Verdict.Reasons, "; "))
			code = 1
			break
		}
	}
	return code
}

// largestHeap samples the heap every 100 ms until the returned stop is called, and
// then writes to path the heap profile taken when the heap in use was largest: what
// the nodes hold at the fleet's peak, not after the bodies returned.
func largestHeap(path string) (stop func()) {
	runtime.MemProfileRate = 64 << 10
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		var best []byte
		var most uint64
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > most {
				var b bytes.Buffer
				runtime.GC() // the profile's in-use figures are as of the last GC
				if pprof.Lookup("heap").WriteTo(&b, 0) == nil {
					most, best = ms.HeapInuse, b.Bytes()
				}
			}
			select {
			case <-done:
				if err := os.WriteFile(path, best, 0o644); err != nil {
					fmt.Fprintln(os.Stderr, "heap profile:", err)
				}
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}
