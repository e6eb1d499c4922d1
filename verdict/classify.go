package verdict

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Pass is which pass of the deploy body judged the node.
type Pass string

const (
	PassDeploy      Pass = "deploy"       // build, copy, switch, then judge
	PassVerdictOnly Pass = "verdict-only" // judge the node as it runs
)

// Input is everything classification looks at: the samples taken after the switch
// and what the deployed configuration defines.
type Input struct {
	Pass         Pass            // the classes are the same in both passes; only Decide tells them apart
	Samples      []Sample        // post-switch samples in time order (sweep, settle, cycle-watch); the last is final
	CycleStart   int             // index in Samples of the first cycle-watch sample (a window = two consecutive samples from there on)
	Owned        map[string]bool // units defined by the deployed configuration (<toplevel>/etc/systemd/system)
	Wanted       map[string]bool // units linked from *.wants/ or *.requires/ in the closure
	Activated    int64           // node unix seconds the running generation was activated
	LoopGrace    time.Duration   // DEPLOY_LOOP_GRACE: default restart-loop budget
	LoopingShare float64         // DEPLOY_LOOPING_BEFORE_GAP
	SettleWindow time.Duration   // a start job older than this is stale
}

// Loop is a unit in a restart loop.
type Loop struct {
	Unit       string `json:"unit"`
	Restarts   int    `json:"restarts"`
	BudgetS    int    `json:"budget_s"`
	OverBudget bool   `json:"over_budget"`
}

// StaleJob is a start job still queued after the settle window.
type StaleJob struct {
	Unit string `json:"unit"`
	Job  string `json:"job"`
	AgeS int    `json:"age_s"`
}

// SpawnFault is a unit systemd could not spawn for a host reason.
type SpawnFault struct {
	Unit   string `json:"unit"`
	Status string `json:"status"` // e.g. "219/CGROUP"
}

// Classes are the unit classes of SPEC 4.2. Every list is nil when the final
// sample's units could not be read, else non-nil (maybe empty), and sorted, so the
// report can tell "<not read>" from "<none>".
type Classes struct {
	Failed           []string     `json:"failed"`
	RestartLoops     []Loop       `json:"restart_loops"`
	Cycling          []string     `json:"cycling"`
	StaleJobs        []StaleJob   `json:"stale_jobs"`
	SpawnFaults      []SpawnFault `json:"spawn_faults"`
	SetAside         []string     `json:"set_aside"`
	ConditionSkipped []string     `json:"condition_skipped"`
}

// loopBudgetVar is the Environment= assignment by which a unit sets its own budget.
const loopBudgetVar = "DEPLOY_LOOP_BUDGET"

// Classify sorts the units of the final sample into the classes of SPEC 4.2. It is
// pure: the same samples always give the same classes.
func Classify(in Input) Classes {
	if len(in.Samples) == 0 || in.Samples[len(in.Samples)-1].Units == nil {
		return Classes{}
	}
	final := in.Samples[len(in.Samples)-1]
	c := Classes{
		Failed: []string{}, RestartLoops: []Loop{}, Cycling: []string{},
		SpawnFaults: []SpawnFault{}, SetAside: []string{}, ConditionSkipped: []string{},
	}
	faulted := map[string]bool{}
	for _, name := range sortedNames(final.Units) {
		u := final.Units[name]
		owned, wanted := in.owns(name), in.Wanted[name]
		if status, ok := spawnFault(u); ok {
			// Never blamed on the closure: not failed, not set aside, not a loop.
			c.SpawnFaults = append(c.SpawnFaults, SpawnFault{Unit: name, Status: status})
			faulted[name] = true
			continue
		}
		switch {
		case failedToLoad(u, owned, wanted), owned && u.ActiveState == "failed":
			c.Failed = append(c.Failed, name)
		case u.ActiveState == "failed":
			c.SetAside = append(c.SetAside, name)
		}
		if (owned || wanted) && conditionSkipped(u) {
			c.ConditionSkipped = append(c.ConditionSkipped, name)
		}
	}
	looping := map[string]bool{}
	for _, name := range sortedNames(final.Units) {
		if faulted[name] || final.Units[name].ActiveState == "failed" {
			continue // reported as what it ended as
		}
		if l, ok := in.loop(name); ok {
			c.RestartLoops = append(c.RestartLoops, l)
			looping[name] = true
		}
	}
	for _, name := range sortedNames(final.Units) {
		if !faulted[name] && !looping[name] && in.cycling(name) {
			c.Cycling = append(c.Cycling, name)
		}
	}
	c.StaleJobs = in.staleJobs()
	return c
}

// owns reports whether the configuration defines the unit, also as an instance of a
// template it defines (getty@tty1.service from getty@.service).
func (in Input) owns(name string) bool {
	if in.Owned[name] {
		return true
	}
	at := strings.IndexByte(name, '@')
	dot := strings.LastIndexByte(name, '.')
	return at >= 0 && dot > at && in.Owned[name[:at+1]+name[dot:]]
}

// failedToLoad: a unit of the configuration whose file systemd rejected, or a unit
// the closure wants that does not exist at all.
func failedToLoad(u Unit, owned, wanted bool) bool {
	switch u.LoadState {
	case "error", "bad-setting":
		return owned || wanted
	case "not-found":
		return wanted
	}
	return false
}

// conditionSkipped: conditions were checked, not met, and the unit stayed down
// (systemd leaves a skipped unit inactive). A unit never started also says
// ConditionResult=no, hence the check time.
func conditionSkipped(u Unit) bool {
	return u.ConditionResult == "no" && u.ConditionAt != 0 && u.ActiveState == "inactive"
}

// stableFor is how long (seconds) a unit must stay up for its active period to count
// as stable: the end of the last stable period restarts a loop's clock.
const stableFor = 60

// loop judges one unit for a restart loop: seen restarting (auto-restart, or
// NRestarts risen since the previous sample) in at least LoopingShare of the samples.
func (in Input) loop(name string) (Loop, bool) {
	seen := 0
	stableEnd := int64(0) // node time of the last sample inside a stable active period
	for i, s := range in.Samples {
		u, ok := s.Units[name]
		if !ok {
			continue
		}
		prev, hadPrev := Unit{}, false
		if i > 0 {
			prev, hadPrev = in.Samples[i-1].Units[name]
		}
		if u.SubState == "auto-restart" || hadPrev && u.NRestarts > prev.NRestarts {
			seen++
		}
		// A stable active period: up for at least stableFor by systemd's own clock.
		// Seeing one invocation in two samples is not enough: a unit that crashes
		// after a second is seen "active" by samples taken in that second.
		if u.ActiveState == "active" && u.ActiveEnter != 0 && s.NodeNow-u.ActiveEnter >= stableFor {
			stableEnd = s.NodeNow
		}
	}
	if seen == 0 || float64(seen) < in.LoopingShare*float64(len(in.Samples)) {
		return Loop{}, false
	}
	final := in.Samples[len(in.Samples)-1]
	u := final.Units[name]
	budget := int(in.LoopGrace / time.Second)
	if v, ok := envValue(u.Environment, loopBudgetVar); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			budget = n
		}
	}
	// Looping time counts from the activation, or from the end of the last stable
	// active period when later. An unknown activation falls back to the first sample,
	// the earliest moment the loop could have been seen.
	start := in.Activated
	if start == 0 {
		start = in.Samples[0].NodeNow
	}
	start = max(start, stableEnd)
	over := false
	if final.NodeNow != 0 && start != 0 {
		over = final.NodeNow-start > int64(budget)
	}
	return Loop{Unit: name, Restarts: u.NRestarts, BudgetS: budget, OverBudget: over}, true
}

// cycling: the unit's active state or invocation changed in two or more cycle-watch
// windows.
func (in Input) cycling(name string) bool {
	changed := 0
	for i := max(in.CycleStart, 0) + 1; i < len(in.Samples); i++ {
		a, okA := in.Samples[i-1].Units[name]
		b, okB := in.Samples[i].Units[name]
		if okA && okB && (a.ActiveState != b.ActiveState || a.InvocationID != b.InvocationID) {
			changed++
		}
	}
	return changed >= 2
}

// staleJobs are the final sample's start jobs queued for at least SettleWindow,
// aged from the first sample that had the same job. nil when the jobs were not read.
func (in Input) staleJobs() []StaleJob {
	final := in.Samples[len(in.Samples)-1]
	if final.Jobs == nil {
		return nil
	}
	stale := []StaleJob{}
	for _, j := range final.Jobs {
		if j.Type != "start" {
			continue
		}
		first := final.At
		for _, s := range in.Samples {
			if slices.ContainsFunc(s.Jobs, func(o Job) bool { return o.ID == j.ID && o.Unit == j.Unit }) {
				first = s.At
				break
			}
		}
		if age := final.At.Sub(first); age >= in.SettleWindow {
			stale = append(stale, StaleJob{Unit: j.Unit, Job: j.Type, AgeS: int(age / time.Second)})
		}
	}
	slices.SortFunc(stale, func(a, b StaleJob) int {
		return cmp.Or(strings.Compare(a.Unit, b.Unit), strings.Compare(a.Job, b.Job))
	})
	return stale
}

func sortedNames(units map[string]Unit) []string {
	names := make([]string, 0, len(units))
	for n := range units {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
