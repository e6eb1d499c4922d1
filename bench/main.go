// Command bench measures switchyard's SSH transport and deploy body on fresh
// test-bed nodes and prints every figure as a ratio to a reference run of the same
// invocation (never as an absolute limit):
//
//	(a) copy of a closure of ~1,000 small paths plus one of tens of MiB, against
//	    nix-copy-closure of the same closure to an identical fresh node, and against
//	    the same bytes through one ssh pipe (the limit); and with half the closure
//	    in the node's own binary cache, against the same copy without it
//	    (bench/substitute.go);
//	(b) a re-copy of the present closure, against `ssh node true`;
//	(c) peak RSS of the copying process;
//	(d) TCP connections opened per deploy (counted by the node's sshd);
//	(e) the per-phase times of one healthy deploy;
//	(h) healthy one-node deploys with the confirmation over a fresh connection on
//	    and off (DEPLOY_CONFIRM_TIMEOUT=0), and their TCP connections (bench/confirm.go);
//	(f) a no-op `tf apply` on two nodes, against a bare `tofu plan` on the same
//	    state (bench/tf.go; needs OpenTofu, -tf=false skips it);
//	(g) the deploy of a second generation to 1, 4, 8 and 16 nodes with the ssh method and
//	    with tf, against the 1-node deploy (bench/fleet.go; -fleet=false skips it,
//	    -fleet-max caps the node count; tf only when OpenTofu is found), with short
//	    (3 x 1 s) and default verdict windows (-fleet-windows). The 1-node and the
//	    largest row run -runs times (3) and give the median run's figures; a table gives
//	    the slowest node's time per phase next to the machine's busy share;
//	(s) a simulated fleet of 1, 50 and 200 fake nodes playing recorded systemd state,
//	    the deploy body in one process: the deployer's CPU and RSS per node (bench/sim.go).
//
// Last, every goal of issue 35 with its figure and whether it was met (bench/goals.go).
//
// Run as root on a machine with the test bed (testbed/setup.sh):
//
//	go run ./bench [-n 1000] [-big 32] [-runs 3] [-tf=false] [-fleet=false] [-fleet-max 16] [-sim-only] [-profile DIR] [-markdown docs/bench.md]
//
// With -markdown the figures also rewrite the one generated figures page, with the
// machine, the date and the flags of the run.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/ssh"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "copy-child" {
		os.Exit(copyChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "sim-child" {
		os.Exit(simChild(os.Args[2:]))
	}
	n := flag.Int("n", 1000, "small store paths in the closure")
	big := flag.Int("big", 32, "MiB of the large store path")
	withTF := flag.Bool("tf", true, "measure (f), the no-op tf apply (needs OpenTofu: SWITCHYARD_TOFU, tofu on PATH, or the test bed's cache)")
	fleet := flag.Bool("fleet", true, "measure (g), the fleet rows (tf rows too when OpenTofu is found)")
	fleetMax := flag.Int("fleet-max", 16, "the largest fleet of (g)")
	fleetTF := flag.Bool("fleet-tf", true, "(g): also the tf rows, when OpenTofu is found (false: ssh only)")
	markdown := flag.String("markdown", "", "also write the figures to this generated page (docs/bench.md), with the machine and the flags")
	flag.Parse()
	if err := checkFlags(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	tofuBin := ""
	if *withTF {
		var err error
		if tofuBin, err = findTofu(); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	fleetTofu := tofuBin
	if !*fleetTF {
		fleetTofu = ""
	} else if *fleet && fleetTofu == "" {
		fleetTofu, _ = findTofu() // not found: (g) measures ssh only
	}
	if !*fleet {
		*fleetMax = 0
	}
	var figures bytes.Buffer
	if *markdown != "" {
		stdout = teeStdout(&figures)
	}
	start := time.Now()
	if err := run(*n, *big, tofuBin, fleetTofu, *fleetMax); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *markdown != "" {
		var args string
		flag.Visit(func(f *flag.Flag) {
			if f.Name != "markdown" {
				args += fmt.Sprintf(" -%s=%s", f.Name, f.Value)
			}
		})
		if err := writeMarkdown(*markdown, figures.Bytes(), start, machine(), args); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}

// checkFlags refuses a bad count or list before anything is built or launched.
func checkFlags() error {
	if *runs < 1 {
		return fmt.Errorf("-runs: %d is not a count of runs (1 or more)", *runs)
	}
	if *fleetRuns < 0 {
		return fmt.Errorf("-fleet-runs: %d is not a count of runs", *fleetRuns)
	}
	if _, err := fleetSizes(); err != nil {
		return err
	}
	if _, err := fleetWindowSets(); err != nil {
		return err
	}
	_, err := simSizes()
	return err
}

// stdout is where the figures are printed: os.Stdout, and with -markdown the page too.
var stdout io.Writer = os.Stdout

// copyChild copies one closure with switchyard's ssh transport, in its own process
// so the parent can read its peak RSS.
func copyChild(args []string) int {
	fs := flag.NewFlagSet("copy-child", flag.ExitOnError)
	port := fs.Int("port", 22, "")
	kh := fs.String("known-hosts", "", "")
	key := fs.String("key", "", "")
	path := fs.String("path", "", "")
	noSubstitute := fs.Bool("no-substitute", false, "")
	_ = fs.Parse(args)
	t, err := ssh.New(ssh.Config{User: "root", Host: "127.0.0.1", Port: *port, KnownHostsFile: *kh, KeyFiles: []string{*key},
		NoSubstitute: *noSubstitute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer t.Close()
	if err := t.CopyClosure(context.Background(), []string{*path}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type row struct {
	what, measured, reference string
	ratio                     float64
}

// run measures (a) to (e), (f) when tofuBin is not "", and (g) up to fleetMax nodes
// (0: not), with tf when fleetTofu is not "".
func run(n, big int, tofuBin, fleetTofu string, fleetMax int) error {
	sizes, err := simSizes()
	if err != nil {
		return err
	}
	if *simOnly {
		return simulated(sizes)
	}
	bed, err := testbed.Open()
	if err != nil {
		return err
	}
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "switchyard-bench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	binary := filepath.Join(tmp, "switchyard")
	build := []string{"build", "-o", binary}
	if *profileDir != "" {
		if err := os.MkdirAll(*profileDir, 0o755); err != nil {
			return err
		}
		build = append(build, "-tags", "benchprofile")
	}
	if out, err := exec.Command("go", append(build, "./cmd/switchyard")...).CombinedOutput(); err != nil {
		return fmt.Errorf("build switchyard: %v: %s", err, out)
	}

	if *fleetOnly {
		return fleetAndGoals(ctx, bed, tmp, binary, fleetTofu, fleetMax, sizes)
	}

	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	fmt.Fprintf(os.Stderr, "bench: building a closure of %d small paths + %d MiB\n", n, big)
	top, err := output("nix-build", "bench/closure.nix", "--no-out-link", "-j", "4",
		"--arg", "n", strconv.Itoa(n), "--arg", "bigMiB", strconv.Itoa(big), "--argstr", "tag", tag)
	if err != nil {
		return err
	}
	top = strings.TrimSpace(top)
	closure, err := output("nix-store", "--query", "--requisites", top)
	if err != nil {
		return err
	}
	paths := strings.Fields(closure)
	healthy, err := output("nix-build", "testbed/closures", "-A", "healthy", "--no-out-link", "--argstr", "tag", "bench"+tag)
	if err != nil {
		return err
	}
	healthy = strings.TrimSpace(healthy)

	var nodes []*testbed.Node
	defer func() {
		for _, nd := range nodes {
			nd.Delete()
		}
	}()
	for _, label := range []string{"bench-switchyard", "bench-reference", "bench-pipe"} {
		dir := filepath.Join(tmp, label)
		os.MkdirAll(dir, 0o755)
		nd, err := bed.Launch(ctx, label, dir)
		if nd != nil {
			nodes = append(nodes, nd)
		}
		if err != nil {
			return err
		}
	}
	sy, ref, pipe := nodes[0], nodes[1], nodes[2]
	fmt.Fprintf(os.Stderr, "bench: %d paths in the closure; nodes up\n", len(paths))

	var rows []row
	// (a) copy to a node lacking the closure, against the references, in alternating
	// order over several rounds (the closure is deleted from the nodes between rounds),
	// so a busy machine weighs on both sides alike; the medians are compared.
	var copyTimes, refTimes, pipeTimes []time.Duration
	var rss, bytesSent int64
	for round := 0; round < *runs; round++ {
		if round > 0 {
			for _, nd := range []*testbed.Node{sy, ref} {
				if _, err := nd.Exec(ctx, append([]string{"nix-store", "--delete"}, paths...)...); err != nil {
					return fmt.Errorf("reset %s: %w", nd.Name, err)
				}
			}
		}
		sides := []func() error{
			func() error {
				d, r, err := timedChild(self, sy, top)
				copyTimes, rss = append(copyTimes, d), max(rss, r)
				return err
			},
			func() error {
				d, err := timed(func() error {
					cmd := exec.Command("nix-copy-closure", "--to", ref.SSHTarget(), top)
					cmd.Env = append(os.Environ(), "NIX_SSHOPTS="+strings.Join(ref.SSHOptions(), " "))
					return runCmd(cmd)
				})
				refTimes = append(refTimes, d)
				return err
			},
			func() error {
				d, n, err := pipeCopy(pipe, paths)
				pipeTimes, bytesSent = append(pipeTimes, d), n
				return err
			},
		}
		if round%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return fmt.Errorf("copy round %d: %w", round+1, err)
			}
		}
	}
	copyTime, refTime, pipeTime := median(copyTimes), median(refTimes), median(pipeTimes)
	rows = append(rows,
		row{"(a) copy, fresh node vs nix-copy-closure", dur(copyTime), dur(refTime), ratio(copyTime, refTime)},
		row{"(a) copy, fresh node vs one ssh pipe of the same " + mib(bytesSent), dur(copyTime), dur(pipeTime), ratio(copyTime, pipeTime)},
	)
	copyGoals(big, ratio(copyTime, refTime), ratio(copyTime, pipeTime), rss)
	sub, err := substituteRow(ctx, self, tmp, sy, top, paths)
	if err != nil {
		return err
	}
	rows = append(rows, sub)
	// (b) re-copy of a present closure.
	recopy, _, err := timedChild(self, sy, top)
	if err != nil {
		return fmt.Errorf("switchyard re-copy: %w", err)
	}
	sshTrue, err := timed(func() error {
		return runCmd(exec.Command("ssh", append(sy.SSHOptions(), sy.SSHTarget(), "true")...))
	})
	if err != nil {
		return err
	}
	rows = append(rows, row{"(b) re-copy of a present closure vs ssh node true", dur(recopy), dur(sshTrue), ratio(recopy, sshTrue)})
	// (c) peak RSS while copying, against the closure's size.
	rows = append(rows, row{"(c) peak RSS of the copy vs bytes copied", mib(rss), mib(bytesSent), float64(rss) / float64(bytesSent)})

	// (d), (e): one healthy deploy.
	before, err := acceptedConnections(sy)
	if err != nil {
		return err
	}
	deployTime := time.Now()
	out, err := output(binary, "deploy", "--node", "bench", "--target", fmt.Sprintf("root@127.0.0.1:%d", sy.SSHPort),
		"--known-hosts", sy.KnownHosts, "--ssh-key", sy.KeyFile, "--toplevel", healthy, "--output", "json")
	if err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	total := time.Since(deployTime)
	after, err := acceptedConnections(sy)
	if err != nil {
		return err
	}
	// The minimum: one. This is the node's first deploy: with no generation to go back
	// to there is nothing to confirm, so no fresh connection ((h) measures that one).
	rows = append(rows, row{"(d) TCP connections opened by one deploy vs the minimum", strconv.Itoa(after - before), "1", float64(after - before)})
	phases, err := phaseTimes(out)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(phases))
	for p := range phases {
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool { return phases[names[i]] > phases[names[j]] })
	for _, p := range names {
		d := time.Duration(phases[p]) * time.Millisecond
		rows = append(rows, row{"(e) phase " + p + " vs the whole deploy", dur(d), dur(total), ratio(d, total)})
	}
	confirm, err := confirmRows(binary, tag, sy)
	if err != nil {
		return err
	}
	rows = append(rows, confirm...)
	if tofuBin != "" {
		tf, err := tfRows(ctx, bed, tmp, binary, tofuBin, &nodes)
		if err != nil {
			return fmt.Errorf("(f): %w", err)
		}
		rows = append(rows, tf...)
	}

	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "closure: %d paths, %s; copies (and tf apply): median of %d alternating rounds\n", len(paths), mib(bytesSent), *runs)
	fmt.Fprintln(w, "measure\tswitchyard\treference\tratio")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t%s\t%.2f\n", r.what, r.measured, r.reference, r.ratio)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return fleetAndGoals(ctx, bed, tmp, binary, fleetTofu, fleetMax, sizes)
}

// fleetAndGoals measures and prints (g) (fleetMax 0: not), (s) for simSizes, then
// every goal of the run.
func fleetAndGoals(ctx context.Context, bed *testbed.Bed, tmp, binary, fleetTofu string, fleetMax int, simSizes []int) error {
	if fleetMax > 0 {
		fleet, closurePaths, err := fleetRows(ctx, bed, tmp, binary, fleetTofu, fleetMax)
		if err != nil {
			return err
		}
		if err := printFleet(stdout, fleet, closurePaths); err != nil {
			return err
		}
	}
	if err := simulated(simSizes); err != nil {
		return err
	}
	return printGoals(stdout)
}

// simulated measures and prints (s) for sizes (none: nothing), deploying the test
// bed's healthy toplevel, which it builds.
func simulated(sizes []int) error {
	if len(sizes) == 0 {
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	top, err := output("nix-build", "testbed/closures", "-A", "healthy", "--no-out-link", "--argstr", "tag", "bench-sim")
	if err != nil {
		return err
	}
	rows, err := simRows(self, strings.TrimSpace(top), sizes)
	if err != nil {
		return err
	}
	return printSim(stdout, rows)
}

func timedChild(self string, nd *testbed.Node, path string, args ...string) (time.Duration, int64, error) {
	cmd := exec.Command(self, append([]string{"copy-child", "--port", strconv.Itoa(nd.SSHPort), "--known-hosts", nd.KnownHosts,
		"--key", nd.KeyFile, "--path", path}, args...)...)
	start := time.Now()
	err := runCmd(cmd)
	took := time.Since(start)
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024
	}
	return took, rss, err
}

// pipeCopy sends the closure's export bytes through one ssh pipe into /dev/null.
func pipeCopy(nd *testbed.Node, paths []string) (time.Duration, int64, error) {
	export := exec.Command("nix-store", append([]string{"--export"}, paths...)...)
	sink := exec.Command("ssh", append(nd.SSHOptions(), nd.SSHTarget(), "cat >/dev/null")...)
	r, w := io.Pipe()
	counter := &countingWriter{w: w}
	export.Stdout = counter
	sink.Stdin = r
	start := time.Now()
	if err := sink.Start(); err != nil {
		return 0, 0, err
	}
	err := export.Run()
	w.CloseWithError(err)
	if werr := sink.Wait(); err == nil {
		err = werr
	}
	return time.Since(start), counter.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// acceptedConnections counts the TCP connections the node's sshd accepted.
func acceptedConnections(nd *testbed.Node) (int, error) {
	out, err := nd.Exec(context.Background(), "journalctl", "--unit", "ssh.service", "--output", "cat", "--no-pager")
	if err != nil {
		return 0, err
	}
	return strings.Count(out, "Accepted publickey"), nil
}

func phaseTimes(jsonLines string) (map[string]int64, error) {
	for _, line := range strings.Split(jsonLines, "\n") {
		var e struct {
			Kind     string           `json:"kind"`
			PhasesMS map[string]int64 `json:"phases_ms"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Kind == "verdict" {
			return e.PhasesMS, nil
		}
	}
	return nil, fmt.Errorf("no verdict in the deploy's output")
}

func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

func runCmd(cmd *exec.Cmd) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", cmd.Args[0], err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func output(name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %v: %s", name, err, lastLine(stderr.String()))
	}
	return stdout.String(), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// runs is -runs: the rounds of the copy comparison and the runs of the fleet's
// 1-node and largest rows; medians are reported.
var runs = flag.Int("runs", 3, "runs of every figure with a goal: the copy rounds of (a), the 1-node and largest rows of (g) (-fleet-runs overrides); medians are reported")

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }
func dur(d time.Duration) string       { return d.Round(time.Millisecond).String() }
func mib(n int64) string               { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
