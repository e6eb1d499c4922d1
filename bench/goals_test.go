package main

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Every goal of issue 35 is printed with its figure and met or not met; one the run
// did not measure says what would measure it.
func TestGoals(t *testing.T) {
	goals = nil
	t.Cleanup(func() { goals, machineCores = nil, runtime.NumCPU() })
	machineCores = 2
	s := time.Second
	copyGoals(32, 0.43, 1.41, 28<<20)
	row := func(method string, w windows, nodes int, wall time.Duration, rss int64) fleetResult {
		return fleetResult{method: method, windows: w, nodes: nodes, wall: wall, rss: rss, walls: []time.Duration{wall, wall, wall}}
	}
	childPeak := row("ssh", shortWindows, 16, 8*s, 70<<20)
	childPeak.selfRSS = 40 << 20
	childPeak.cpu = 2 * s
	childPeak.solos = []soloResult{{wall: 9 * s, cpu: 6 * s}, {wall: 7 * s, cpu: 5 * s}, {wall: 10 * s, cpu: 6 * s}}
	ownPeak := row("ssh", defaultWindows, 16, 28*s, 60<<20)
	ownPeak.selfRSS = 60 << 20
	fleetGoals([]fleetResult{
		row("ssh", shortWindows, 1, 6*s, 30<<20), childPeak,
		row("ssh", defaultWindows, 1, 22*s, 30<<20), ownPeak,
		row("tf", shortWindows, 1, 6*s, 80<<20), row("tf", shortWindows, 4, 7*s, 80<<20),
	})
	var b bytes.Buffer
	if err := printGoals(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"(a) copy of the bench closure vs nix-copy-closure  0.43x",
		"at most 0.5x  met",
		"(a) copy of the bench closure vs one ssh pipe  1.41x",
		"at most 1.3x  not met",
		"not measured (-big 1024)",
		"(g) ssh, 3 x 1 s windows: 16 nodes vs 1 node  1.33x (8s / 6s)  at most 1.5x  met  medians of 3 runs: 16 nodes 8s, 8s, 8s; 1 node 6s, 6s, 6s",
		"(g) ssh, 3 x 1 s windows: 16 nodes by one process vs one process per node, at once (the test bed's queue divided out)  1.14x (8s / 7s)  at most 1.5x  met  one process per node: 9s, 7s, 10s; the median's 9s less its extra deployer CPU (6s against 2s) over 2 cores; uncredited 0.89x",
		"(g) ssh, 3 x 1 s windows: deployer peak RSS at 16 nodes  70.0 MiB  under 64 MiB  not met  a child's (nix-instantiate, nix-store); switchyard's own peak 40.0 MiB",
		"(g) ssh, default windows (4 x 5 s): 16 nodes vs 1 node  1.27x",
		"at most 1.2x  not met",
		"(g) ssh, default windows (4 x 5 s): deployer peak RSS at 16 nodes  60.0 MiB",
		"(g) ssh, default windows (4 x 5 s): deployer peak RSS at 16 nodes  60.0 MiB  under 64 MiB  met  switchyard's own",
		"(g) tf, 3 x 1 s windows: 16 nodes vs 1 node  -",
		"not measured (-fleet-sizes with 1 and 16 (largest here: 4))",
	} {
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Count(out, "the test bed's queue divided out") != 1 {
		t.Errorf("a reference's goal for a row that measured none:\n%s", out)
	}
	if strings.Contains(out, "tf, 3 x 1 s windows: deployer peak RSS") {
		t.Errorf("an RSS goal for tf:\n%s", out)
	}
}

// The peak RSS of one process is the VmHWM line of its /proc status, in bytes (the
// lines recorded from a running Go daemon, incusd, on the test bed's machine).
func TestParseVmHWM(t *testing.T) {
	status := "Name:\tincusd\nVmPeak:\t 7772680 kB\nVmSize:\t 7731728 kB\nVmHWM:\t  218320 kB\nVmRSS:\t  212192 kB\n"
	if got, ok := parseVmHWM(status); !ok || got != 218320<<10 {
		t.Errorf("parseVmHWM = %d, %v; want %d", got, ok, 218320<<10)
	}
	for _, bad := range []string{"", "VmHWM:\t 12 MB\n", "VmHWM:\n"} {
		if _, ok := parseVmHWM(bad); ok {
			t.Errorf("parseVmHWM(%q) read a figure", bad)
		}
	}
}

// squeeze makes tabwriter's runs of spaces two spaces.
func squeeze(s string) string {
	for strings.Contains(s, "   ") {
		s = strings.ReplaceAll(s, "   ", "  ")
	}
	return s
}

// The reference is credited with the CPU it spent beyond the fleet's process, over
// the cores, and never below zero; one that spent less is not credited.
func TestCreditedWall(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		ref      soloResult
		fleetCPU time.Duration
		cores    int
		want     time.Duration
	}{
		{soloResult{wall: 30 * s, cpu: 13 * s}, 3 * s, 2, 25 * s},
		{soloResult{wall: 30 * s, cpu: 13 * s}, 3 * s, 1, 20 * s},
		{soloResult{wall: 30 * s, cpu: 2 * s}, 3 * s, 2, 30 * s},
		{soloResult{wall: 30 * s, cpu: 3 * s}, 3 * s, 2, 30 * s},
		{soloResult{wall: 4 * s, cpu: 20 * s}, 2 * s, 2, 0},
		{soloResult{wall: 30 * s, cpu: 13 * s}, 3 * s, 0, 30 * s},
	} {
		if got := creditedWall(tc.ref, tc.fleetCPU, tc.cores); got != tc.want {
			t.Errorf("creditedWall(%+v, %s, %d) = %s, want %s", tc.ref, tc.fleetCPU, tc.cores, got, tc.want)
		}
	}
}
