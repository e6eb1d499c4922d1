package main

// (g): the fleet rows (issue 14 item 1). One closure, the same toplevel on every node,
// deployed to 1, 4, 8 and 16 test-bed nodes by one `switchyard ssh apply` and by one
// `switchyard tf apply` process each; every row is a ratio to the 1-node run of the
// same method. The nodes run a first generation, deployed untimed: the timed deploy is
// the everyday one, a new generation that the node confirms over a fresh connection
// (SPEC 4.6, issue 30), with a closure none of whose paths the node holds.
//
// What a row includes. The timed process is the whole apply: reading the tree, one
// evaluation per node (every node has its own nixos_conf, so the eval cache cannot
// share them even though the toplevel is the same), the local "already built" check,
// and per node the deploy body (wait, push of the closure the node lacks, switch, the
// confirmation, and the verdict's settle and cycle watch); with tf also `tofu init`,
// the provider plugin and OpenTofu's own graph walk. Nodes are launched in parallel before the clock starts
// and deleted after each row.
//
// The rows also split the wall time with the JSON events, stamped as they arrive
// (the events carry no clock of their own): "deployer part" is the time until the
// last node's push phase is done (everything the deployer machine does for the
// fleet: evaluation, the closure query and export, the streams into the nodes and
// their imports), the rest is the switch and the judging on the nodes, which take the
// same time whatever the fleet's size.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// The fleet's closure: a testbed "healthy" toplevel that also references a closure
// of fleetPaths small paths and fleetMiB MiB (bench/closure.nix), the size issue 14
// item 4 measured the copy with.
const (
	fleetPaths = 200
	fleetMiB   = 4
)

// For finding what serialises: the nodes deployed at once. By default every row
// deploys all its nodes at once (--parallel N for N nodes), as an operator sizing
// the run to the fleet does: at the default width (8) a 16-node run is two waves,
// whatever the deployer does. OpenTofu's -parallelism follows --parallel.
var (
	fleetParallel = flag.Int("fleet-parallel", 0, "(g): pass --parallel N to every apply (0: the row's node count; -1: the method's default, 8)")
	fleetOnly     = flag.Bool("fleet-only", false, "measure (g) only")
	fleetSizesArg = flag.String("fleet-sizes", "1,4,8,16", "(g): the node counts, comma-separated (at most -fleet-max)")
	fleetRuns     = flag.Int("fleet-runs", 0, "(g): runs of the smallest and the largest row, whose medians give the issue figures (0: -runs)")
	fleetWindows  = flag.String("fleet-windows", "short,default", "(g): the verdict windows of the timed deploys, comma-separated: short (3 x 1 s) and default (4 x 5 s)")
)

// windows are the verdict's cycle-watch windows of a timed deploy: the default
// (4 x 5 s) hides the work behind 20 s of waiting, short ones (3 x 1 s) show it.
type windows struct {
	name string   // "short" or "default"
	env  []string // the DEPLOY_CYCLE_* settings
}

var (
	shortWindows   = windows{"short", []string{"DEPLOY_CYCLE_WINDOWS=3", "DEPLOY_CYCLE_INTERVAL=1"}}
	defaultWindows = windows{"default", nil}
)

func (w windows) String() string {
	if w.name == "short" {
		return "3 x 1 s windows"
	}
	return "default windows (4 x 5 s)"
}

// fleetWindowSets are -fleet-windows' settings, in order.
func fleetWindowSets() ([]windows, error) {
	var out []windows
	for _, f := range strings.Split(*fleetWindows, ",") {
		switch strings.TrimSpace(f) {
		case "short":
			out = append(out, shortWindows)
		case "default":
			out = append(out, defaultWindows)
		default:
			return nil, fmt.Errorf("-fleet-windows: %q is neither short nor default", f)
		}
	}
	return out, nil
}

// fleetRunCount is -fleet-runs, or -runs when it is 0.
func fleetRunCount() int {
	if *fleetRuns > 0 {
		return *fleetRuns
	}
	return max(1, *runs)
}

// fleetSizes are the fleet rows' node counts (at most -fleet-max).
func fleetSizes() ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(*fleetSizesArg, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-fleet-sizes: %q is not a node count", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// fleetResult is one timed apply.
type fleetResult struct {
	method  string
	windows windows
	nodes   int
	wall    time.Duration
	cpu     time.Duration // user+sys of switchyard and every descendant it (or they) waited for
	self    time.Duration // of that, switchyard's own (its last /proc sample)
	rss     int64         // the largest maxrss among them
	selfRSS int64         // of them, switchyard's own peak (VmHWM, sampled like self)
	// From the events: when the last node's push was done, and per phase the
	// slowest node's time (the verdicts' phases_ms).
	lastPush  time.Duration
	firstBody time.Duration // the first phase event of any node: startup before the bodies
	// afterBodies is from the last node's conclude to the run's summary: what the
	// deployer does once every body is done (-1: no conclude was streamed, as with tf).
	afterBodies time.Duration
	phases      map[string]int64
	events      []stampedEvent
	nodeCPU     nodeCPU // the nodes' own CPU, by phase, and the machine's busy share
	// parts is the nodes' own CPU over the timed apply by where inside them it went
	// (partsOK: every node's could be read).
	parts   testbed.CPUParts
	partsOK bool
	// walls are the wall times of every run of the row, in order; the row's figures are
	// those of the run with the median wall time (-fleet-runs).
	walls []time.Duration
	// confirmed counts the nodes whose record of the timed switch says it was
	// confirmed (SPEC 4.6), as the nodes hold it.
	confirmed int
	// solos are the test bed's reference of every run of the row (solo.go): ssh rows
	// of more than one node.
	solos []soloResult
}

// medianRun is the run whose wall time is the median of runs (the lower middle of an
// even count), with the wall times of all of them, in the order they ran.
func medianRun(runs []fleetResult) fleetResult {
	walls := make([]time.Duration, len(runs))
	var solos []soloResult
	for i, r := range runs {
		walls[i] = r.wall
		solos = append(solos, r.solos...)
	}
	sorted := append([]fleetResult(nil), runs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].wall < sorted[j].wall })
	m := sorted[(len(sorted)-1)/2]
	m.walls, m.solos = walls, solos
	return m
}

type stampedEvent struct {
	at   time.Duration
	line string
}

// fleetRows measures the fleet rows for ssh and, when tofuBin is not "", for tf. It
// prints its progress on stderr; every node it launches is deleted before it returns.
func fleetRows(ctx context.Context, bed *testbed.Bed, tmp, binary, tofuBin string, maxNodes int) ([]fleetResult, int, error) {
	if err := raiseLimits(); err != nil {
		return nil, 0, err
	}
	tag := "fleet" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dir := filepath.Join(tmp, "fleet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
	}
	// Three generations: every row deploys the first to its fresh nodes untimed, then
	// times the deploy of the second, which the confirmation over a fresh connection
	// covers (SPEC 4.6: a node with no generation to go back to has nothing to
	// confirm); the third is the test bed's reference (solo.go). They share no path, so
	// each timed push copies the whole closure.
	var builders [3]string
	var top string
	for i, gen := range []string{"base", "", "solo"} {
		expr, err := writeFleetToplevel(dir, tag+gen)
		if err != nil {
			return nil, 0, err
		}
		fmt.Fprintf(os.Stderr, "bench: (g) building the fleet closure %q (%d small paths + %d MiB)\n", tag+gen, fleetPaths, fleetMiB)
		out, err := output("nix-build", expr, "--no-out-link")
		if err != nil {
			return nil, 0, fmt.Errorf("build the fleet closure: %w", err)
		}
		if gen == "" {
			top = out
		}
		builders[i] = "{ configuration, plan }: import " + strconv.Quote(expr) + "\n"
	}
	closure, err := output("nix-store", "--query", "--requisites", strings.TrimSpace(top))
	if err != nil {
		return nil, 0, err
	}

	sizes, err := fleetSizes()
	if err != nil {
		return nil, 0, err
	}
	sets, err := fleetWindowSets()
	if err != nil {
		return nil, 0, err
	}
	methods := []string{"ssh"}
	if tofuBin != "" {
		methods = append(methods, "tf")
	}
	sizes = slices.DeleteFunc(sizes, func(n int) bool { return n > maxNodes })
	if len(sizes) == 0 {
		return nil, len(strings.Fields(closure)), nil
	}
	// The issue figure is a ratio of two rows' wall times, and one run of a row moves
	// by a few per cent with what the nodes' systemd happens to do: those two rows
	// run -fleet-runs times each, the others once.
	smallest, largest := slices.Min(sizes), slices.Max(sizes)
	var results []fleetResult
	for _, method := range methods {
		for _, win := range sets {
			for _, n := range sizes {
				runs := 1
				if n == smallest || n == largest {
					runs = fleetRunCount()
				}
				var rs []fleetResult
				for run := 1; run <= runs; run++ {
					label := fmt.Sprintf("%s-%s-%d", method, win.name, n)
					if runs > 1 {
						label = fmt.Sprintf("%s-run%d", label, run)
					}
					r, err := fleetRow(ctx, bed, filepath.Join(dir, label), binary, tofuBin, builders, method, win, n, label)
					if err != nil {
						// The rows measured so far are still printed.
						fmt.Fprintf(os.Stderr, "bench: (g) %s, %s, %d nodes: %v\n", method, win, n, err)
						_ = printFleet(os.Stdout, results, len(strings.Fields(closure)))
						return nil, 0, fmt.Errorf("(g) %s, %s, %d nodes: %w", method, win, n, err)
					}
					fmt.Fprintf(os.Stderr, "bench: (g) %s, %s, %d nodes, run %d of %d: %s\n", method, win, n, run, runs, dur(r.wall))
					rs = append(rs, r)
				}
				results = append(results, medianRun(rs))
			}
		}
	}
	return results, len(strings.Fields(closure)), nil
}

// writeFleetToplevel writes the expression of one fleet generation: testbed's
// healthy, copied (its switch-to-configuration finds its toplevel from its own path),
// plus a file naming the bench closure, which makes that closure part of the
// toplevel's. tag makes both the generation's own.
func writeFleetToplevel(dir, tag string) (string, error) {
	expr := filepath.Join(dir, "toplevel-"+tag+".nix")
	src := fmt.Sprintf(`# The fleet benchmark's toplevel (bench/fleet.go): the same on every node.
let
  closures = import %q { tag = %q; };
  bench = import %q { n = %d; bigMiB = %d; tag = %q; };
in
derivation {
  name = "nixos-system-%s";
  system = builtins.currentSystem;
  builder = "/bin/sh";
  healthy = closures.healthy;
  inherit bench;
  args = [ "-c" "/bin/cp -R $healthy/. $out && /bin/chmod -R u+w $out && echo $bench > $out/bench-closure" ];
}
`, filepath.Join(testbed.RepoRoot(), "testbed", "closures"), tag,
		filepath.Join(testbed.RepoRoot(), "bench", "closure.nix"), fleetPaths, fleetMiB, tag, tag)
	return expr, os.WriteFile(expr, []byte(src), 0o644)
}

// fleetRow launches n fresh nodes (in parallel, before the clock starts), deploys the
// first generation to them untimed, waits for them to go quiet (waitQuiet), times the
// deploy of the second with one `switchyard <method> apply`, with ssh and more than one
// node times the test bed's reference (soloRef), and deletes them.
func fleetRow(ctx context.Context, bed *testbed.Bed, dir, binary, tofuBin string, builders [3]string, method string, win windows, n int, label string) (fleetResult, error) {
	fmt.Fprintf(os.Stderr, "bench: (g) %s, %d nodes: launching\n", method, n)
	nodes, err := launchFleet(ctx, bed, dir, n)
	defer func() {
		var wg sync.WaitGroup
		for _, nd := range nodes {
			wg.Add(1)
			go func() { defer wg.Done(); nd.Delete() }()
		}
		wg.Wait()
	}()
	if err != nil {
		return fleetResult{}, err
	}
	var spec plantest.Tree
	for i, nd := range nodes {
		spec.Nodes = append(spec.Nodes, plantest.Node{Name: fmt.Sprintf("n%02d", i+1), Host: "127.0.0.1", Port: nd.SSHPort, HostKey: nd.HostKey})
	}
	tree := filepath.Join(dir, "tree")
	if err := plantest.Write(tree, spec); err != nil {
		return fleetResult{}, err
	}
	fmt.Fprintf(os.Stderr, "bench: (g) %s, %d nodes: the first generation (untimed)\n", method, n)
	if err := os.WriteFile(filepath.Join(tree, "builder.nix"), []byte(builders[0]), 0o644); err != nil {
		return fleetResult{}, err
	}
	// The untimed generation always takes short windows: its 20 s of waiting measure nothing.
	if r, err := timedApply(fleetApply(ctx, bed, dir, binary, tofuBin, tree, method, shortWindows, n)); err != nil {
		return fleetResult{}, fmt.Errorf("the first generation: %s apply: %w", method, err)
	} else if err := tfCheck(eventLines(r), spec, false); err != nil {
		return fleetResult{}, fmt.Errorf("the first generation: %s apply: %w", method, err)
	}
	if err := os.WriteFile(filepath.Join(tree, "builder.nix"), []byte(builders[1]), 0o644); err != nil {
		return fleetResult{}, err
	}
	instances := make([]string, len(nodes))
	for i, nd := range nodes {
		instances[i] = nd.Name
	}
	waited, quiet := waitQuiet(instances)
	fmt.Fprintf(os.Stderr, "bench: (g) %s, %d nodes: waited %s for the nodes to go quiet (quiet: %v); %s apply\n", method, n, waited.Round(time.Second), quiet, method)
	stopCPU := make(chan struct{})
	cpuSamples := sampleCPU(instances, time.Now(), stopCPU)
	partsBefore, okBefore := sumParts(instances)
	r, err := timedApply(fleetApply(ctx, bed, dir, binary, tofuBin, tree, method, win, n))
	partsAfter, okAfter := sumParts(instances)
	close(stopCPU)
	r.parts, r.partsOK = partsAfter.Sub(partsBefore), okBefore && okAfter
	r.method, r.windows, r.nodes = method, win, n
	names := make([]string, len(spec.Nodes))
	for i, nd := range spec.Nodes {
		names[i] = nd.Name
	}
	r.nodeCPU = splitCPU(<-cpuSamples, names, r.events)
	writeEvents(label, r)
	if err != nil {
		return r, fmt.Errorf("%s apply: %w", method, err)
	}
	if err := tfCheck(eventLines(r), spec, false); err != nil {
		return r, fmt.Errorf("%s apply: %w", method, err)
	}
	r.confirmed = confirmedNodes(ctx, nodes)
	if method == "ssh" && n > 1 {
		solo, err := soloRef(ctx, bed, filepath.Join(dir, "solo"), binary, builders[2], spec, instances, win, label)
		if err != nil {
			return r, fmt.Errorf("the test bed's reference: %w", err)
		}
		r.solos = []soloResult{solo}
	}
	return r, nil
}

// writeEvents writes the stamped events of a run (also a failed one) as label's into
// SWITCHYARD_BENCH_EVENTS, when it is set: for finding what serialises.
func writeEvents(label string, r fleetResult) {
	dir := os.Getenv("SWITCHYARD_BENCH_EVENTS")
	if dir == "" {
		return
	}
	var b strings.Builder
	for _, e := range r.events {
		fmt.Fprintf(&b, "%6d %s\n", e.at.Milliseconds(), e.line)
	}
	_ = os.WriteFile(filepath.Join(dir, label+".events"), []byte(b.String()), 0o644)
}

// confirmedNodes counts the nodes holding a switch record in state "confirmed": the
// first generation's says "done" (no generation to go back to), so each one found is
// the timed deploy's, confirmed over a fresh connection. A node not counted is named
// on stderr with what it held or why it could not be read: a count short of the
// fleet is then a node's record or a failed read, never a silent guess.
func confirmedNodes(ctx context.Context, nodes []*testbed.Node) int {
	var count int
	for _, nd := range nodes {
		out, err := nd.Exec(ctx, "sh", "-c", "cat /run/switchyard/switch/*/state")
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "bench: (g) %s: reading its switch records: %v\n", nd.Name, err)
		case slices.Contains(strings.Fields(out), "confirmed"):
			count++
		default:
			fmt.Fprintf(os.Stderr, "bench: (g) %s: no switch record says confirmed: %q\n", nd.Name, strings.Join(strings.Fields(out), " "))
			recs, _ := nd.Exec(ctx, "sh", "-c", recordDump)
			fmt.Fprintf(os.Stderr, "bench: (g) %s: its records:\n%s", nd.Name, recs)
		}
	}
	return count
}

// recordDump prints every switch record a node holds, file by file with its time,
// and the state of each record's unit: what a count short of the fleet is made of.
const recordDump = `for d in /run/switchyard/switch/*/; do
	u=${d%/}; u=${u##*/}
	printf '  %s (unit %s)\n' "$d" "$(systemctl show --property=ActiveState,SubState,Result --value -- "$u" | tr '\n' ' ')"
	for f in "$d"* "$d".[!.]*; do
		[ -f "$f" ] && printf '    %s %s: %s\n' "$(date -r "$f" +%T.%N)" "${f##*/}" "$(head -c 200 "$f" | tr '\n' ' ')"
	done
done
`

// fleetApply is the row's `switchyard <method> apply` of tree, into the row's state
// and eval cache directories.
func fleetApply(ctx context.Context, bed *testbed.Bed, dir, binary, tofuBin, tree, method string, win windows, n int) *exec.Cmd {
	deployment := fmt.Sprintf(`{"deployment-method":{%q:{"sshKeyFile":%q}}}`, method, bed.KeyFile)
	args := []string{method, "apply", "--tree", tree, "--state-dir", filepath.Join(dir, "state"), "--output", "json"}
	switch {
	case *fleetParallel > 0:
		args = append(args, "--parallel", strconv.Itoa(*fleetParallel))
	case *fleetParallel == 0:
		args = append(args, "--parallel", strconv.Itoa(n))
	}
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "DEPLOYMENT="+deployment, "DEPLOY_EVAL_CACHE_DIR="+filepath.Join(dir, "eval-cache"), credentialDirs())
	cmd.Env = append(cmd.Env, win.env...)
	cmd.Env = append(cmd.Env, profileEnv(filepath.Base(dir))...)
	if tofuBin != "" {
		cmd.Env = append(cmd.Env, envTofu+"="+tofuBin)
	}
	return cmd
}

// eventLines is r's output, one event a line.
func eventLines(r fleetResult) string {
	lines := make([]string, len(r.events))
	for i, e := range r.events {
		lines[i] = e.line
	}
	return strings.Join(lines, "\n")
}

// launchFleet launches n nodes at once; the nodes launched are returned also on an
// error, for the caller to delete.
func launchFleet(ctx context.Context, bed *testbed.Bed, dir string, n int) ([]*testbed.Node, error) {
	nodes := make([]*testbed.Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := filepath.Join(dir, fmt.Sprintf("node%02d", i+1))
			if errs[i] = os.MkdirAll(d, 0o755); errs[i] != nil {
				return
			}
			// Sixteen containers starting at once on a loaded machine: now and then
			// one does not come up; a second try gets another instance.
			for try := 0; try < 3; try++ {
				var nd *testbed.Node
				lctx, cancel := context.WithTimeout(ctx, 10*time.Minute) // a busy machine boots slowly
				nd, errs[i] = bed.Launch(lctx, fmt.Sprintf("bench-fleet-%d", i+1), d)
				cancel()
				if errs[i] == nil || nd == nil {
					nodes[i] = nd
					return
				}
				fmt.Fprintf(os.Stderr, "bench: (g) node %d: %v; another try\n", i+1, errs[i])
				nd.Delete()
			}
		}()
	}
	wg.Wait()
	var launched []*testbed.Node
	for _, nd := range nodes {
		if nd != nil {
			launched = append(launched, nd)
		}
	}
	for i, err := range errs {
		if err != nil {
			return launched, fmt.Errorf("launch node %d: %w", i+1, err)
		}
	}
	return launched, nil
}

// timedApply runs cmd, stamping each line of its output as it arrives, and reads its
// CPU time and peak RSS from its rusage: wait4's rusage of a child covers the
// descendants it waited for (nix-instantiate, nix-store; with tf, OpenTofu and the
// provider it starts), and its maxrss is the largest of them.
func timedApply(cmd *exec.Cmd) (fleetResult, error) {
	var r fleetResult
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	// switchyard's own CPU and peak RSS apart from its children's: its /proc stat and
	// status, sampled until it exits (rusage only gives the sum, and the largest).
	sampled := make(chan ownUsage)
	stop := make(chan struct{})
	go func() {
		var last ownUsage
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			if d, ok := selfCPU(cmd.Process.Pid); ok {
				last.cpu = d
			}
			if hwm, ok := selfPeakRSS(cmd.Process.Pid); ok {
				last.rss = max(last.rss, hwm)
			}
			select {
			case <-stop:
				sampled <- last
				return
			case <-tick.C:
			}
		}
	}()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		r.events = append(r.events, stampedEvent{time.Since(start), sc.Text()})
	}
	_, _ = io.Copy(io.Discard, stdout)
	close(stop)
	own := <-sampled
	r.self, r.selfRSS = own.cpu, own.rss
	err = cmd.Wait()
	r.wall = time.Since(start)
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime() + ps.SystemTime()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.rss = ru.Maxrss * 1024
		}
	}
	if err != nil {
		return r, fmt.Errorf("%v: %s", err, lastLine(stderr.String()))
	}
	r.phases = map[string]int64{}
	r.firstBody = -1
	lastConclude, summary := time.Duration(-1), time.Duration(-1)
	creating := map[string]time.Duration{}
	for _, e := range r.events {
		var ev struct {
			Kind     string           `json:"kind"`
			Node     string           `json:"node"`
			Msg      string           `json:"msg"`
			Phase    string           `json:"phase"`
			State    string           `json:"state"`
			PhasesMS map[string]int64 `json:"phases_ms"`
		}
		if json.Unmarshal([]byte(e.line), &ev) != nil {
			continue
		}
		switch ev.Kind {
		case "log":
			// tf: the provider's phases are not streamed; a node's body starts at
			// OpenTofu's "Creating..." (the first generation) or "Modifying...".
			if ev.Node != "" && (strings.HasSuffix(ev.Msg, ": Creating...") || strings.Contains(ev.Msg, ": Modifying... ")) {
				creating[ev.Node] = e.at
				if r.firstBody < 0 {
					r.firstBody = e.at
				}
			}
		case "phase":
			if r.firstBody < 0 {
				r.firstBody = e.at
			}
			if ev.Phase == "push" && ev.State != "start" {
				r.lastPush = max(r.lastPush, e.at)
			}
			if ev.Phase == "conclude" && ev.State != "start" {
				lastConclude = max(lastConclude, e.at)
			}
		case "summary":
			summary = e.at
		case "verdict":
			for p, ms := range ev.PhasesMS {
				r.phases[p] = max(r.phases[p], ms)
			}
			if at, ok := creating[ev.Node]; ok {
				// tf: the push ended build+wait+push after "Creating...".
				ms := ev.PhasesMS["build"] + ev.PhasesMS["wait"] + ev.PhasesMS["push"]
				r.lastPush = max(r.lastPush, at+time.Duration(ms)*time.Millisecond)
			}
		}
	}
	r.afterBodies = -1
	if lastConclude >= 0 && summary >= lastConclude {
		r.afterBodies = summary - lastConclude
	}
	return r, nil
}

// key groups the rows a ratio compares: one method with one windows setting.
func (r fleetResult) key() string { return r.method + ", " + r.windows.String() }

// printFleet prints the fleet rows after the other rows: per method, windows and
// size, the wall time and its ratio to the same group's 1-node run, the deployer's
// part, CPU and peak RSS; then the slowest node's time per phase against the
// machine's busy share; then the goals of the fleet (goals.go).
func printFleet(w io.Writer, results []fleetResult, closurePaths int) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "\n(g) fleet: the deploy of a second generation (%d paths, none on the nodes; the same toplevel on every node; confirmed over a fresh connection) by one switchyard process", closurePaths)
	switch {
	case *fleetParallel > 0:
		fmt.Fprintf(tw, "; --parallel %d", *fleetParallel)
	case *fleetParallel == 0:
		fmt.Fprint(tw, "; --parallel <nodes>: all at once")
	default:
		fmt.Fprint(tw, "; the default --parallel (8)")
	}
	fmt.Fprintf(tw, "; the 1-node and largest rows: the median of %d runs\n", fleetRunCount())
	fmt.Fprintln(tw, "method\twindows\tnodes\twall\tvs 1 node\tdeployer part\tvs 1 node\tbodies start\tCPU (user+sys)\tCPU vs 1 node\tof it switchyard's own\tpeak RSS (the largest process)\tswitchyard's own\tconfirmed\tafter the last body")
	one := map[string]fleetResult{}
	for _, r := range results {
		if r.nodes == 1 {
			one[r.key()] = r
		}
	}
	for _, r := range results {
		o, ok := one[r.key()]
		wr, pr, cr := "-", "-", "-"
		if ok {
			wr = fmt.Sprintf("%.2f", ratio(r.wall, o.wall))
			pr = fmt.Sprintf("%.2f", ratio(r.lastPush, o.lastPush))
			cr = fmt.Sprintf("%.2f", ratio(r.cpu, o.cpu))
		}
		after := "-"
		if r.afterBodies >= 0 {
			after = dur(r.afterBodies)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.method, r.windows.name, r.nodes, dur(r.wall), wr,
			dur(r.lastPush), pr, dur(r.firstBody), dur(r.cpu), cr, dur(r.self), mib(r.rss), mib(r.selfRSS), r.confirmed, after)
	}
	printPhaseTable(tw, results)
	printSolo(tw, results)
	fmt.Fprintln(tw, "\nmethod\twindows\tnodes\tthe nodes' own CPU (their containers), by the phase each node was in")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.method, r.windows.name, r.nodes, r.nodeCPU)
	}
	printParts(tw, results)
	if err := tw.Flush(); err != nil {
		return err
	}
	fleetGoals(results)
	return nil
}

// printPhaseTable prints, per row, the slowest node's time in each phase of the body
// (the verdicts' phases_ms) next to the machine's busy share over the apply: a phase
// that grows with the fleet while the machine is not busy waits on something shared
// that is not the CPU.
func printPhaseTable(w io.Writer, results []fleetResult) {
	var cols []string
	for _, p := range effects.PhaseNames() {
		for _, r := range results {
			if r.phases[p] >= 5 {
				cols = append(cols, p)
				break
			}
		}
	}
	fmt.Fprintln(w, "\nthe slowest node's time per phase (ms), against the machine's busy share (all its cores): over the apply, and over the nodes' work (the first phase to the last node's settle)")
	fmt.Fprintf(w, "method\twindows\tnodes\tbusy: apply\tbusy: work\twork window\t%s\n", strings.Join(cols, "\t"))
	for _, r := range results {
		busy, work, window := "-", "-", "-"
		if r.nodeCPU.busy > 0 {
			busy = fmt.Sprintf("%.0f%%", 100*r.nodeCPU.busy)
		}
		if r.nodeCPU.work > 0 {
			work, window = fmt.Sprintf("%.0f%%", 100*r.nodeCPU.workBusy), dur(r.nodeCPU.work)
		}
		cells := make([]string, len(cols))
		for i, p := range cols {
			cells[i] = strconv.FormatInt(r.phases[p], 10)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.method, r.windows.name, r.nodes, busy, work, window, strings.Join(cells, "\t"))
	}
}

// runsNote says, when a figure's rows ran more than once, that it is a ratio of medians
// and what each run took: "; medians of 3 runs: 16 nodes 44.1s, 45s, 43.2s; 1 node ...".
func runsNote(rows ...fleetResult) string {
	if len(rows) == 0 || len(rows[0].walls) < 2 {
		return ""
	}
	var parts []string
	for _, r := range rows {
		ws := make([]string, len(r.walls))
		for i, w := range r.walls {
			ws[i] = dur(w)
		}
		noun := "nodes"
		if r.nodes == 1 {
			noun = "node"
		}
		parts = append(parts, fmt.Sprintf("%d %s %s", r.nodes, noun, strings.Join(ws, ", ")))
	}
	return fmt.Sprintf("; medians of %d runs: %s", len(rows[0].walls), strings.Join(parts, "; "))
}

// selfCPU is a process's own user+sys time from /proc/PID/stat (fields 14 and 15,
// in clock ticks: 100 per second on Linux), without its children's.
func selfCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces: fields count from its ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// ownUsage is what the samples of switchyard's own process read.
type ownUsage struct {
	cpu time.Duration
	rss int64
}

// selfPeakRSS is the peak resident set of pid alone (VmHWM of /proc/pid/status): the
// rusage of the waited command gives only the largest of it and its descendants, which
// may be a child (nix-instantiate evaluating a batch of nodes, OpenTofu).
func selfPeakRSS(pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	return parseVmHWM(string(b))
}

// parseVmHWM reads the "VmHWM:   1234 kB" line of a /proc status file, in bytes.
func parseVmHWM(status string) (int64, bool) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb << 10, err == nil
	}
	return 0, false
}

// manyNodes are the kernel limits the test bed needs for many containers at once
// (TESTBED.md, "Many nodes at once"): with fs.inotify.max_user_instances at its
// default of 128, about the fifteenth container's systemd fails and it stops right
// after launch.
var manyNodes = []struct {
	path string
	min  int64
}{
	{"/proc/sys/fs/inotify/max_user_instances", 8192},
	{"/proc/sys/kernel/keys/maxkeys", 2000},
	{"/proc/sys/kernel/keys/maxbytes", 2000000},
}

// raiseLimits raises each of manyNodes that is below its minimum (never lowers one).
func raiseLimits() error {
	for _, l := range manyNodes {
		b, err := os.ReadFile(l.path)
		if err != nil {
			return err
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", l.path, err)
		}
		if v >= l.min {
			continue
		}
		fmt.Fprintf(os.Stderr, "bench: (g) raising %s from %d to %d for many nodes at once\n", l.path, v, l.min)
		if err := os.WriteFile(l.path, []byte(strconv.FormatInt(l.min, 10)), 0o644); err != nil {
			return fmt.Errorf("raise %s (TESTBED.md, many nodes at once): %w", l.path, err)
		}
	}
	return nil
}

// credentialDirs lets the deploys the bench starts take the bed's client key as a
// submitted credential (SPEC 6.9), as an operator's deployer names its staging area.
func credentialDirs() string {
	return "SWITCHYARD_CREDENTIAL_DIRS=" + strings.Join(testbed.CredentialDirs(), ":")
}

// profileDir is -profile: the directory the deployer's block and mutex profiles of
// every fleet apply go to (the switchyard binary is then built with -tags benchprofile).
var profileDir = flag.String("profile", "", "(g): write the ssh deployer's block and mutex profiles of each apply to this directory (LABEL.block.pprof, LABEL.mutex.pprof)")

// profileEnv is the environment that makes a benchprofile build write the apply's
// profiles as label's, none without -profile.
func profileEnv(label string) []string {
	if *profileDir == "" {
		return nil
	}
	return []string{"SWITCHYARD_BENCH_PROFILE=" + filepath.Join(*profileDir, label)}
}

// sumParts is the instances' CPUParts summed; ok is false when any could not be read.
func sumParts(instances []string) (testbed.CPUParts, bool) {
	var sum testbed.CPUParts
	for _, in := range instances {
		p, ok := testbed.InstanceCPUParts(in)
		if !ok {
			return testbed.CPUParts{}, false
		}
		sum = sum.Add(p)
	}
	return sum, true
}

// printParts prints the nodes' own CPU of every row by where inside the nodes it
// went: what switchyard asks of a node (every command over ssh) apart from what the
// node's systemd and the activation spend.
func printParts(w io.Writer, results []fleetResult) {
	fmt.Fprintln(w, "\nthe nodes' own CPU over the apply, by cgroup inside them: sshd's tree runs every command switchyard sends (the copy's nix-store, the verdict's samples, the lock) and their ssh sessions; PID 1 is systemd itself (its D-Bus answers and jobs); the rest is the units it ran (the switch's unit: the activation) and journald")
	fmt.Fprintln(w, "method\twindows\tnodes\tall\tsshd's\tper node\tPID 1\tper node\tthe rest\tper node")
	for _, r := range results {
		if !r.partsOK {
			fmt.Fprintf(w, "%s\t%s\t%d\t-\t-\t-\t-\t-\t-\t-\n", r.method, r.windows.name, r.nodes)
			continue
		}
		n := time.Duration(max(r.nodes, 1))
		p := r.parts
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.method, r.windows.name, r.nodes, dur(p.All),
			dur(p.SSH), dur(p.SSH/n), dur(p.PID1), dur(p.PID1/n), dur(p.Rest()), dur(p.Rest()/n))
	}
}
