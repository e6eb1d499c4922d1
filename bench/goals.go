package main

// The goals of issue 35, printed last with each figure next to its goal and whether
// it was met. A figure the run did not measure (a -big too small for the 1 GiB case,
// a largest fleet other than 16, -fleet=false) is listed as not measured, so the
// list is the same for every invocation.

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// machineCores is the cores the nodes and the deployer share (a test sets its own).
var machineCores = runtime.NumCPU()

// goal is one figure against its goal.
type goal struct {
	figure string // what was measured
	value  string // the figure, "" when not measured
	target string // the goal
	met    bool
	why    string // when not measured: what would measure it
	detail string // the runs behind the figure, printed last
}

// goals are the run's, in the order measured.
var goals []goal

// Limits of issue 35.
const (
	copyVsReference   = 0.5  // the copy against nix-copy-closure
	copyVsPipe        = 1.3  // the copy against one ssh pipe of the same bytes
	bigCopyVsPipe     = 1.1  // "at the pipe": the 1 GiB case, within 10% of it
	bigCopyMiB        = 1024 // -big from which (a) is the 1 GiB case
	rssLimit          = 64 << 20
	fleetShortLimit   = 1.5 // 16 nodes against 1, 3 x 1 s windows
	fleetDefaultLimit = 1.2 // the same with the default windows
	fleetGoalNodes    = 16
)

func addGoal(figure, value, target string, met bool) {
	goals = append(goals, goal{figure: figure, value: value, target: target, met: met})
}

func notMeasured(figure, target, why string) {
	goals = append(goals, goal{figure: figure, target: target, why: why})
}

// copyGoals adds (a)'s goals: the bench closure's two ratios, or with -big 1024 the
// 1 GiB case's ratio to the pipe and its peak RSS.
func copyGoals(big int, toRef, toPipe float64, rss int64) {
	const small, large = "(a) copy of the bench closure", "(a) copy with a 1 GiB path"
	if big < bigCopyMiB {
		addGoal(small+" vs nix-copy-closure", fmt.Sprintf("%.2fx", toRef), fmt.Sprintf("at most %.1fx", copyVsReference), toRef <= copyVsReference)
		addGoal(small+" vs one ssh pipe", fmt.Sprintf("%.2fx", toPipe), fmt.Sprintf("at most %.1fx", copyVsPipe), toPipe <= copyVsPipe)
		notMeasured(large+" vs one ssh pipe", fmt.Sprintf("at the pipe (at most %.1fx)", bigCopyVsPipe), "-big 1024")
		notMeasured(large+", peak RSS", "under 64 MiB", "-big 1024")
		return
	}
	notMeasured(small+" vs nix-copy-closure", fmt.Sprintf("at most %.1fx", copyVsReference), "-big 32")
	notMeasured(small+" vs one ssh pipe", fmt.Sprintf("at most %.1fx", copyVsPipe), "-big 32")
	addGoal(large+" vs one ssh pipe", fmt.Sprintf("%.2fx", toPipe), fmt.Sprintf("at the pipe (at most %.1fx)", bigCopyVsPipe), toPipe <= bigCopyVsPipe)
	addGoal(large+", peak RSS", mib(rss), "under 64 MiB", rss < rssLimit)
}

// fleetGoals adds (g)'s goals for every method and windows measured: the largest
// row's wall time against the 1-node row's, and with ssh the largest row's peak RSS.
func fleetGoals(results []fleetResult) {
	type group struct{ one, most fleetResult }
	var order []string
	groups := map[string]*group{}
	for _, r := range results {
		g, ok := groups[r.key()]
		if !ok {
			g = &group{}
			groups[r.key()] = g
			order = append(order, r.key())
		}
		if r.nodes == 1 {
			g.one = r
		}
		if r.nodes > g.most.nodes {
			g.most = r
		}
	}
	for _, k := range order {
		g := groups[k]
		limit := fleetDefaultLimit
		if g.most.windows.name == "short" {
			limit = fleetShortLimit
		}
		target := fmt.Sprintf("at most %.1fx", limit)
		figure := fmt.Sprintf("(g) %s: %d nodes vs 1 node", k, fleetGoalNodes)
		if g.one.nodes != 1 || g.most.nodes != fleetGoalNodes {
			notMeasured(figure, target, fmt.Sprintf("-fleet-sizes with 1 and %d (largest here: %d)", fleetGoalNodes, g.most.nodes))
		} else {
			rt := ratio(g.most.wall, g.one.wall)
			addGoal(figure, fmt.Sprintf("%.2fx (%s / %s)", rt, dur(g.most.wall), dur(g.one.wall)), target, rt <= limit)
			note := strings.TrimPrefix(runsNote(g.most, g.one), "; ")
			if note == "" {
				note = "one run each"
			}
			goals[len(goals)-1].detail = note
			soloGoal(k, g.most, limit)
		}
		if g.most.method != "ssh" {
			continue
		}
		figure = fmt.Sprintf("(g) %s: deployer peak RSS at %d nodes", k, fleetGoalNodes)
		if g.most.nodes != fleetGoalNodes {
			notMeasured(figure, "under 64 MiB", fmt.Sprintf("-fleet-sizes with %d", fleetGoalNodes))
			continue
		}
		// Judged on the largest process of the run, as the issue measured it; the
		// detail says whose it was: switchyard's own peak apart.
		addGoal(figure, mib(g.most.rss), "under 64 MiB", g.most.rss < rssLimit)
		goals[len(goals)-1].detail = rssWhose(g.most)
	}
}

// soloGoal adds the fleet's figure with the test bed's queue divided out (solo.go):
// the largest row's wall against the same nodes each deployed by a process of its own,
// all at once, with the same limit as against one node alone. It is judged against
// the reference credited with its extra deployer CPU (creditedWall), so the
// reference's own cost cannot flatter the fleet; the plain ratio is in the detail.
func soloGoal(key string, most fleetResult, limit float64) {
	s, ok := medianSolo(most.solos)
	if !ok {
		return
	}
	credited := creditedWall(s, most.cpu, machineCores)
	rt := ratio(most.wall, credited)
	figure := fmt.Sprintf("(g) %s: %d nodes by one process vs one process per node, at once (the test bed's queue divided out)", key, most.nodes)
	addGoal(figure, fmt.Sprintf("%.2fx (%s / %s)", rt, dur(most.wall), dur(credited)), fmt.Sprintf("at most %.1fx", limit), rt <= limit)
	walls := make([]string, len(most.solos))
	for i, r := range most.solos {
		walls[i] = dur(r.wall)
	}
	goals[len(goals)-1].detail = fmt.Sprintf("one process per node: %s; the median's %s less its extra deployer CPU (%s against %s) over %d cores; uncredited %.2fx",
		strings.Join(walls, ", "), dur(s.wall), dur(s.cpu), dur(most.cpu), machineCores, ratio(most.wall, s.wall))
}

// creditedWall is the reference's wall less the time its extra deployer CPU could
// have cost it: the CPU its processes spent beyond the fleet's one process
// (fleetCPU), spread over the machine's cores. Every such second is taken as delay
// of the slowest node, the most it can be, so the credited reference is never slower
// than a reference without that work would be. A reference that spent less CPU than
// the fleet is not credited.
func creditedWall(ref soloResult, fleetCPU time.Duration, cores int) time.Duration {
	extra := ref.cpu - fleetCPU
	if extra <= 0 || cores < 1 {
		return ref.wall
	}
	return max(ref.wall-extra/time.Duration(cores), 0)
}

// printGoals prints every goal of the run: the figure, the goal, met or not met.
func printGoals(w io.Writer) error {
	if len(goals) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\ngoals of issue 35\tmeasured\tgoal\t\t")
	for _, g := range goals {
		switch {
		case g.why != "":
			fmt.Fprintf(tw, "%s\t-\t%s\tnot measured (%s)\n", g.figure, g.target, g.why)
		case g.met:
			fmt.Fprintf(tw, "%s\t%s\t%s\tmet\t%s\n", g.figure, g.value, g.target, g.detail)
		default:
			fmt.Fprintf(tw, "%s\t%s\t%s\tnot met\t%s\n", g.figure, g.value, g.target, g.detail)
		}
	}
	return tw.Flush()
}

// rssWhose says whether a run's peak RSS was switchyard's own or a child's
// (nix-instantiate evaluating a batch of nodes), from switchyard's sampled VmHWM.
func rssWhose(r fleetResult) string {
	switch {
	case r.selfRSS == 0:
		return "switchyard's own peak not sampled"
	case r.selfRSS >= r.rss:
		return "switchyard's own"
	}
	return fmt.Sprintf("a child's (nix-instantiate, nix-store); switchyard's own peak %s", mib(r.selfRSS))
}
