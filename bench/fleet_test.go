package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

func TestMedianRun(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		walls []time.Duration
		want  time.Duration
	}{
		{[]time.Duration{22 * s}, 22 * s},
		{[]time.Duration{46 * s, 43 * s, 44 * s}, 44 * s},
		{[]time.Duration{43 * s, 44 * s, 46 * s}, 44 * s},
		{[]time.Duration{45 * s, 43 * s, 44 * s, 46 * s}, 44 * s}, // the lower middle
	} {
		var runs []fleetResult
		for i, w := range tc.walls {
			runs = append(runs, fleetResult{nodes: 16, wall: w, self: time.Duration(i)})
		}
		got := medianRun(runs)
		if got.wall != tc.want {
			t.Errorf("medianRun(%v).wall = %v, want %v", tc.walls, got.wall, tc.want)
		}
		// The row's other figures are the median run's own.
		if tc.walls[got.self] != got.wall {
			t.Errorf("medianRun(%v) mixed runs: self from run %d, wall %v", tc.walls, got.self, got.wall)
		}
		if len(got.walls) != len(tc.walls) || got.walls[0] != tc.walls[0] {
			t.Errorf("medianRun(%v).walls = %v, want every run in order", tc.walls, got.walls)
		}
	}
}

func TestRunsNote(t *testing.T) {
	s := time.Second
	sixteen := fleetResult{nodes: 16, walls: []time.Duration{44 * s, 46 * s, 43 * s}}
	one := fleetResult{nodes: 1, walls: []time.Duration{22 * s, 23 * s, 22 * s}}
	want := "; medians of 3 runs: 16 nodes 44s, 46s, 43s; 1 node 22s, 23s, 22s"
	if got := runsNote(sixteen, one); got != want {
		t.Errorf("runsNote = %q, want %q", got, want)
	}
	if got := runsNote(fleetResult{nodes: 16, walls: []time.Duration{44 * s}}, fleetResult{nodes: 1, walls: []time.Duration{22 * s}}); got != "" {
		t.Errorf("runsNote of single runs = %q, want none", got)
	}
}

// The work window's busy share runs from the first phase event to the last node's
// settle, from the samples bracketing it; the waiting after it does not dilute it.
func TestWorkShare(t *testing.T) {
	s := time.Second
	samples := []cpuSample{
		{at: 0, busy: 0, total: 100},
		{at: 1 * s, busy: 10, total: 200},    // before the work
		{at: 2 * s, busy: 100, total: 300},   // busy
		{at: 3 * s, busy: 190, total: 400},   // busy
		{at: 10 * s, busy: 200, total: 1100}, // the windows: idle
	}
	ev := func(at time.Duration, line string) stampedEvent { return stampedEvent{at, line} }
	events := []stampedEvent{
		ev(1*s, `{"kind":"phase","node":"n01","phase":"build","state":"start"}`),
		ev(2500*time.Millisecond, `{"kind":"phase","node":"n01","phase":"settle","state":"start"}`),
		ev(3*s, `{"kind":"phase","node":"n02","phase":"settle","state":"start"}`),
		ev(9*s, `{"kind":"verdict","node":"n01"}`),
	}
	share, window := workShare(samples, events)
	if share != 0.9 || window != 2*s {
		t.Errorf("workShare = %v over %v, want 0.9 over 2s", share, window)
	}
	if share, _ := workShare(samples, events[:1]); share != 0 {
		t.Errorf("no settle: share %v, want none", share)
	}
}

// printParts gives each row's nodes' CPU by cgroup, summed and per node; a row whose
// nodes could not be read prints dashes, never zeros.
func TestPrintParts(t *testing.T) {
	ms := time.Millisecond
	var b bytes.Buffer
	printParts(&b, []fleetResult{
		{method: "ssh", windows: shortWindows, nodes: 4, parts: testbed.CPUParts{All: 8000 * ms, SSH: 4800 * ms, PID1: 1200 * ms}, partsOK: true},
		{method: "tf", windows: shortWindows, nodes: 4},
	})
	out := strings.ReplaceAll(b.String(), "\t", " ")
	for _, want := range []string{
		"method windows nodes all sshd's per node PID 1 per node the rest per node",
		"ssh short 4 8s 4.8s 1.2s 1.2s 300ms 2s 500ms",
		"tf short 4 - - - - - - -",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}
