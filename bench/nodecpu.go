package main

// What the nodes spend, for finding what serialises in (g): on this machine the
// nodes are containers sharing its cores with the deployer, so a fleet's wall time
// grows with the CPU its nodes burn as much as with anything the deployer does.
// nodeCPU samples every node's cgroup CPU time and the machine's busy time while an
// apply runs, and splits the nodes' CPU by the phase each node was in (from the
// phase events, stamped as they arrive).

import (
	"encoding/json"
	"fmt"
	"github.com/switchyard-nix/switchyard/testbed"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// cpuSample is one reading: per node its cgroup's CPU time, and the machine's busy
// and total time (all in nanoseconds).
type cpuSample struct {
	at          time.Duration
	nodes       []int64
	busy, total int64
}

// nodeCPU is what a run's samples say.
type nodeCPU struct {
	total   time.Duration            // the nodes' CPU, summed
	byPhase map[string]time.Duration // of it, per phase (summed over nodes)
	busy    float64                  // the machine's busy share of all its cores over the run
	// workBusy is that share over the nodes' work only: from the first phase event
	// to the last node's start of settle (the waiting windows after it idle the
	// machine and dilute the whole run's share), with the window's length.
	workBusy float64
	work     time.Duration
	ok       bool // the cgroups could be read
}

// cgroupUsage is an Incus container's CPU time in ns (testbed.InstanceCPU).
func cgroupUsage(instance string) (int64, bool) {
	d, ok := testbed.InstanceCPU(instance)
	return int64(d), ok
}

// machineTimes is /proc/stat's first line: busy (all but idle and iowait) and total,
// in ns (USER_HZ is 100 on Linux).
func machineTimes() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy * 1e7, total * 1e7
}

// sampleCPU samples the instances every 200 ms from start until stop is closed, and
// sends the samples on the returned channel then.
func sampleCPU(instances []string, start time.Time, stop <-chan struct{}) <-chan []cpuSample {
	out := make(chan []cpuSample, 1)
	go func() {
		var samples []cpuSample
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			s := cpuSample{at: time.Since(start), nodes: make([]int64, len(instances))}
			for i, in := range instances {
				s.nodes[i], _ = cgroupUsage(in)
			}
			s.busy, s.total = machineTimes()
			samples = append(samples, s)
			select {
			case <-stop:
				out <- samples
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// splitCPU attributes each interval's CPU of node i (named nodeNames[i] in the
// events) to the phase that node was in at the interval's start: "(before its body)"
// until its first phase, "(after its body)" after its verdict's last phase.
func splitCPU(samples []cpuSample, nodeNames []string, events []stampedEvent) nodeCPU {
	res := nodeCPU{byPhase: map[string]time.Duration{}}
	if len(samples) < 2 {
		return res
	}
	type mark struct {
		at    time.Duration
		phase string
	}
	timeline := map[string][]mark{}
	for _, e := range events {
		var ev struct {
			Kind, Node, Phase, State string
		}
		if json.Unmarshal([]byte(e.line), &ev) != nil || ev.Node == "" {
			continue
		}
		switch {
		case ev.Kind == "phase" && ev.State == "start":
			timeline[ev.Node] = append(timeline[ev.Node], mark{e.at, ev.Phase})
		case ev.Kind == "verdict":
			timeline[ev.Node] = append(timeline[ev.Node], mark{e.at, "(after its body)"})
		}
	}
	phaseAt := func(node string, at time.Duration) string {
		p := "(before its body)"
		for _, m := range timeline[node] {
			if m.at > at {
				break
			}
			p = m.phase
		}
		return p
	}
	res.workBusy, res.work = workShare(samples, events)
	first, last := samples[0], samples[len(samples)-1]
	for i, name := range nodeNames {
		if first.nodes[i] == 0 || last.nodes[i] == 0 {
			return res // a cgroup that could not be read: no split
		}
		for k := 1; k < len(samples); k++ {
			d := time.Duration(samples[k].nodes[i] - samples[k-1].nodes[i])
			res.byPhase[phaseAt(name, samples[k-1].at)] += d
			res.total += d
		}
	}
	if t := last.total - first.total; t > 0 {
		res.busy = float64(last.busy-first.busy) / float64(t)
	}
	res.ok = true
	return res
}

// workShare is the machine's busy share from the first phase event to the last
// "settle" start (the nodes' work, before the verdict's waiting), and that window.
func workShare(samples []cpuSample, events []stampedEvent) (float64, time.Duration) {
	from, to := time.Duration(-1), time.Duration(0)
	for _, e := range events {
		var ev struct{ Kind, Phase, State string }
		if json.Unmarshal([]byte(e.line), &ev) != nil || ev.Kind != "phase" {
			continue
		}
		if from < 0 {
			from = e.at
		}
		if ev.Phase == "settle" && ev.State == "start" {
			to = max(to, e.at)
		}
	}
	if from < 0 || to <= from {
		return 0, 0
	}
	// The samples bracketing the window: the last at or before from, the first at or after to.
	var a, b *cpuSample
	for i := range samples {
		if samples[i].at <= from {
			a = &samples[i]
		}
		if samples[i].at >= to && b == nil {
			b = &samples[i]
		}
	}
	if a == nil || b == nil || b.total <= a.total {
		return 0, 0
	}
	return float64(b.busy-a.busy) / float64(b.total-a.total), b.at - a.at
}

// String is the split, largest first: "total 12.3s; cycle-watch 5.1s, switch 3.2s, ...".
func (c nodeCPU) String() string {
	if !c.ok {
		return "-"
	}
	var names []string
	for p := range c.byPhase {
		names = append(names, p)
	}
	sort.Slice(names, func(i, j int) bool { return c.byPhase[names[i]] > c.byPhase[names[j]] })
	var parts []string
	for _, p := range names {
		if d := c.byPhase[p]; d >= 50*time.Millisecond {
			parts = append(parts, fmt.Sprintf("%s %s", p, d.Round(10*time.Millisecond)))
		}
	}
	return fmt.Sprintf("total %s; %s", c.total.Round(10*time.Millisecond), strings.Join(parts, ", "))
}

// quietLimit is the nodes' summed CPU per second below which freshly launched nodes
// count as booted and idle: 5% of one core.
const quietLimit = 50 * time.Millisecond

// waitQuiet waits, up to a minute, until the nodes' summed CPU over one second is
// below quietLimit: containers that report "running" still finish their boot's
// work for some seconds (sixteen started at once for longer), and that is not the
// deploy's. It returns how long it waited and whether the nodes got quiet.
func waitQuiet(instances []string) (time.Duration, bool) {
	sum := func() (d time.Duration) {
		for _, in := range instances {
			c, _ := testbed.InstanceCPU(in)
			d += c
		}
		return d
	}
	start := time.Now()
	prev := sum()
	for time.Since(start) < time.Minute {
		time.Sleep(time.Second)
		cur := sum()
		if cur-prev < quietLimit {
			return time.Since(start), true
		}
		prev = cur
	}
	return time.Since(start), false
}
