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
	SettleWindow time.Duration   // a start job older than this is stale
	// Restarts is systemd's own restart history of the units LoopSuspects named, read
	// from the journal (RestartsArgv, ParseRestarts) in the loop watch, oldest first.
	// A unit without records is judged from the samples alone.
	Restarts map[string][]Restart
	// Before is the sample taken before the switch (the snapshot); zero when none
	// was. With it a unit that was failed then and has not run since (inactive with
	// the same invocation, or unloaded) is told from one that ran again:
	// switch-to-configuration-ng runs reset-failed before its daemon-reload, which
	// clears the failure and runs nothing (failedRunIsLast).
	Before Sample
	// Switch is what switch-to-configuration said it did with units (its journal);
	// zero when it said nothing, was not read, or did not run (the verdict-only pass).
	Switch SwitchLog
}

// Loop is a unit in a restart loop.
type Loop struct {
	Unit       string `json:"unit"`
	Restarts   int    `json:"restarts"` // systemd's NRestarts
	BudgetS    int    `json:"budget_s"`
	OverBudget bool   `json:"over_budget"`
	// LoopingS is how long the unit has been looping by the node's clock: from the
	// loop's start (the activation of the running generation, or the end of the
	// unit's last stable active period if later) to the final sample.
	LoopingS int `json:"looping_s"`
}

// Pending is an owned unit still starting when the watch ended: activating, or
// with a start job still queued.
type Pending struct {
	Unit string `json:"unit"`
	// State is "activating/<substate>" (systemd's ActiveState and SubState, e.g.
	// "activating/start") or "queued/<job state>" for a start job not yet running.
	State string `json:"state"`
	// AgeS is how long it has been starting: since systemd began the start
	// (InactiveExitTimestamp) for an activating unit; since the first sample that
	// showed the job for a queued one (a job carries no timestamp).
	AgeS int `json:"age_s"`
}

// StaleJob is a start job still queued after the settle window.
type StaleJob struct {
	Unit string `json:"unit"`
	Job  string `json:"job"`
	AgeS int    `json:"age_s"`
}

// SpawnFault is a unit systemd could not spawn for a host reason.
type SpawnFault struct {
	Unit string `json:"unit"`
	// Stage is the command whose status says it, StageStartPre, StageStart or
	// StageStartPost, or StageNone ("") when no process ran (Status "resources").
	Stage  string `json:"stage"`
	Status string `json:"status"` // e.g. "219/CGROUP", or "resources"
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
	Pending          []Pending    `json:"pending"`
	// NotRestarted are owned units whose new definition is not in effect after the
	// switch (see Input.notRestarted). They fail nothing: NixOS leaves them so on
	// purpose (restartIfChanged = false, socket activation), and the operator decides.
	NotRestarted []string `json:"not_restarted"`
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
		NotRestarted: []string{},
	}
	faulted := map[string]bool{}
	for _, name := range sortedNames(final.Units) {
		u := final.Units[name]
		owned, wanted := in.owns(name), in.Wanted[name]
		if stage, status, ok := spawnFault(u); ok {
			// Never blamed on the closure: not failed, not set aside, not a loop.
			c.SpawnFaults = append(c.SpawnFaults, SpawnFault{Unit: name, Stage: stage, Status: status})
			faulted[name] = true
			continue
		}
		failed := u.ActiveState == "failed" || in.failedRunIsLast(name, u, true)
		switch {
		case failedToLoad(u, owned, wanted), owned && failed:
			c.Failed = append(c.Failed, name)
		case failed:
			c.SetAside = append(c.SetAside, name)
		}
		if (owned || wanted) && conditionSkipped(u) {
			c.ConditionSkipped = append(c.ConditionSkipped, name)
		}
		if owned && in.notRestarted(name, u) {
			c.NotRestarted = append(c.NotRestarted, name)
		}
	}
	for _, name := range sortedNames(in.Before.Units) {
		if _, listed := final.Units[name]; listed || !in.failedRunIsLast(name, Unit{}, false) {
			continue
		}
		if in.owns(name) {
			c.Failed = append(c.Failed, name)
		} else {
			c.SetAside = append(c.SetAside, name)
		}
	}
	slices.Sort(c.Failed)
	slices.Sort(c.SetAside)
	looping := map[string]bool{}
	for _, name := range LoopSuspects(final) {
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
	c.Pending = in.pending()
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

// failedRunIsLast: the unit was failed before the switch and nothing has run it
// since it failed: the switch's reset-failed (ng runs one before its daemon-reload)
// only cleared the state, so it is judged as the failed unit it still is. u is the
// unit in the final sample, listed says whether that sample has it at all. Either it
// is inactive there with the invocation it failed in (both samples must have read it
// in full: an invocation ID not read proves nothing), or systemd no longer has it
// loaded: once reset, a unit nothing references is unloaded, while one that ran again
// was loaded to run and is referenced by what started it (a timer, a socket, a
// dependency). Only a start by hand that succeeded and was unloaded again between
// the two samples reads the same.
func (in Input) failedRunIsLast(name string, u Unit, listed bool) bool {
	b, ok := in.Before.Units[name]
	if !ok || !b.Full || b.ActiveState != "failed" || b.InvocationID == "" {
		return false
	}
	if !listed {
		return true
	}
	return u.Full && u.ActiveState == "inactive" && u.InvocationID == b.InvocationID
}

// notRestarted: the owned unit's new definition is not in effect after the switch.
//
//   - It runs an invocation started before the activation while its unit file
//     changed: systemd says so (NeedDaemonReload, when no daemon-reload followed the
//     change), or the switch named it among the changed units it did not restart
//     ("NOT restarting the following changed units") and it has been active since
//     before the activation (a restart since would have put its new definition in
//     effect).
//   - It is a socket-activated service the switch stopped and did not start again
//     (ng restarts the socket of a changed socket-activated service, not the
//     service), still inactive, and its socket is active: it is judged by its socket,
//     which is up, so it is neither failed nor pending; its new definition runs at
//     the first connection and has not run yet.
func (in Input) notRestarted(name string, u Unit) bool {
	running := u.ActiveState == "active" || u.ActiveState == "activating" || u.ActiveState == "reloading"
	switch {
	case running && u.NeedReload:
		return true
	case running && slices.Contains(in.Switch.NotRestarted, name):
		return u.ActiveEnter != 0 && in.Activated != 0 && u.ActiveEnter < in.Activated
	case u.ActiveState == "inactive" && slices.Contains(in.Switch.Stopped, name) && !slices.Contains(in.Switch.Started, name):
		return in.socketActive(u)
	}
	return false
}

// socketActive: one of the sockets that start the unit (TriggeredBy) is active in
// the final sample.
func (in Input) socketActive(u Unit) bool {
	final := in.Samples[len(in.Samples)-1]
	for _, t := range u.TriggeredBy {
		if strings.HasSuffix(t, ".socket") && final.Units[t].ActiveState == "active" {
			return true
		}
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

// MinLoopRestarts is the fewest automatic restarts, with no stable period between
// them, that make a restart loop: one restart is a crash, two show a cadence.
const MinLoopRestarts = 2

// stableNow: the unit is up and has been for a stable period, by systemd's clock.
func stableNow(u Unit, now int64) bool {
	return u.ActiveState == "active" && u.ActiveEnter != 0 && now-u.ActiveEnter >= stableFor
}

// LoopSuspects are the units of a sample that may be in a restart loop: systemd
// restarted them automatically (NRestarts > 0, or waiting to restart) and they have
// not been up for a stable period since. Failed units and spawn faults are reported
// as what they ended as.
func LoopSuspects(s Sample) []string {
	var out []string
	for _, name := range sortedNames(s.Units) {
		u := s.Units[name]
		if _, _, fault := spawnFault(u); fault || u.ActiveState == "failed" {
			continue
		}
		if (u.NRestarts > 0 || autoRestart(u)) && !stableNow(u, s.NodeNow) {
			out = append(out, name)
		}
	}
	return out
}

// loop judges one of LoopSuspects for a restart loop by systemd's own record: its restart
// counter and timestamps, and the restart history the journal kept. The loop is
// the run of automatic restarts since the end of the unit's last stable active
// period; it counts once it holds MinLoopRestarts, whatever the sampling saw.
func (in Input) loop(name string) (Loop, bool) {
	final := in.Samples[len(in.Samples)-1]
	u := final.Units[name]
	restarts, start := in.loopSpan(name, u)
	if restarts < MinLoopRestarts {
		return Loop{}, false
	}
	budget := int(in.LoopGrace / time.Second)
	if v, ok := envValue(u.Environment, loopBudgetVar); ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			budget = n
		}
	}
	// Looping time counts from the activation, or from the end of the last stable
	// active period when later. An unknown start falls back to the first sample,
	// the earliest moment the loop could have been seen.
	start = max(start, in.Activated)
	if start == 0 {
		start = in.Samples[0].NodeNow
	}
	l := Loop{Unit: name, Restarts: u.NRestarts, BudgetS: budget}
	if final.NodeNow != 0 && start != 0 {
		l.LoopingS = int(max(final.NodeNow-start, 0))
		l.OverBudget = l.LoopingS > budget
	}
	return l, true
}

// loopSpan is the number of automatic restarts in the unit's current loop and the
// node time the loop began (0 unknown).
//
// From the journal's restart records (systemd's "Scheduled restart job, restart
// counter is at N", logged when a restart is carried out): the records of the
// current counter (NRestarts counts from the last start that was not automatic,
// and from 0 again after reset-failed), walked back from the newest while the unit
// could not have been up for a stable period between two of them. Between two
// restarts the unit was up for their distance less its restart delay (RestartSec=
// and the start itself), which systemd's timestamps give: the last time the unit
// came back up (ActiveEnterTimestamp) less the time it went down before
// (ActiveExitTimestamp). The loop began when the first of those restarts' runs
// ended: its record less the delay.
//
// Without a history: NRestarts restarts, and the loop's start is the end of the
// last stable period the samples saw, if any.
func (in Input) loopSpan(name string, u Unit) (restarts int, start int64) {
	hist := in.Restarts[name]
	if len(hist) == 0 { // not read, or the journal kept nothing (Storage=none, rotated away)
		for _, s := range in.Samples {
			if v, ok := s.Units[name]; ok && stableNow(in.entered(name, v, s.NodeNow), s.NodeNow) {
				start = s.NodeNow
			}
		}
		return u.NRestarts, start
	}
	series := currentSeries(hist)
	delay := in.restartDelay(name)
	k := len(series) - 1
	for k > 0 && series[k].At-series[k-1].At-delay < stableFor {
		k--
	}
	return len(series) - k, series[k].At - delay
}

// entered is v, the unit name in a sample at node time now, with the time it
// entered active filled in when the sample only listed it: an invocation ID names
// one start, so a sample that read the same invocation in full, entered active by
// then, tells it. Otherwise v is returned as it is (ActiveEnter 0: not known, so
// never a stable period).
func (in Input) entered(name string, v Unit, now int64) Unit {
	if v.Full || v.ActiveState != "active" || v.ExportedInvocation == "" {
		return v
	}
	for _, s := range in.Samples {
		if f, ok := s.Units[name]; ok && f.Full && f.InvocationID == v.ExportedInvocation && f.ActiveEnter != 0 && f.ActiveEnter <= now {
			v.ActiveEnter = f.ActiveEnter
			return v
		}
	}
	return v
}

// restartDelay is the unit's time from going down to being up again, from the
// latest sample that saw it up after a restart (while it waits to restart, its
// ActiveExitTimestamp is newer than its ActiveEnterTimestamp); 0 when none did.
func (in Input) restartDelay(name string) int64 {
	for i := len(in.Samples) - 1; i >= 0; i-- {
		u, ok := in.Samples[i].Units[name]
		if ok && u.ActiveExit != 0 && u.ActiveEnter > u.ActiveExit {
			return u.ActiveEnter - u.ActiveExit
		}
	}
	return 0
}

// currentSeries is the tail of hist (oldest first) that belongs to the unit's
// current restart counter: the records after the last one whose counter did not
// rise (the counter was reset by a start that was not automatic, or a reboot).
func currentSeries(hist []Restart) []Restart {
	i := len(hist) - 1
	for i > 0 && hist[i].Counter > hist[i-1].Counter {
		i--
	}
	return hist[max(i, 0):]
}

// pending are the owned units of the final sample still starting: activating
// (not a unit waiting to restart: that is a loop's business) or with a start job
// queued. nil when the units or the jobs were not read.
func (in Input) pending() []Pending {
	final := in.Samples[len(in.Samples)-1]
	if final.Jobs == nil {
		return nil
	}
	out := []Pending{}
	seen := map[string]bool{}
	for _, name := range sortedNames(final.Units) {
		u := final.Units[name]
		if !in.owns(name) || u.ActiveState != "activating" || autoRestart(u) {
			continue
		}
		age := 0
		if u.InactiveExit != 0 && final.NodeNow != 0 {
			age = int(max(final.NodeNow-u.InactiveExit, 0))
		}
		out = append(out, Pending{Unit: name, State: "activating/" + u.SubState, AgeS: age})
		seen[name] = true
	}
	for _, j := range final.Jobs {
		if j.Type != "start" || seen[j.Unit] || !in.owns(j.Unit) {
			continue
		}
		out = append(out, Pending{Unit: j.Unit, State: "queued/" + j.Stat, AgeS: int(final.At.Sub(in.firstSeen(j)) / time.Second)})
		seen[j.Unit] = true
	}
	slices.SortFunc(out, func(a, b Pending) int { return strings.Compare(a.Unit, b.Unit) })
	return out
}

// firstSeen is the host time of the first sample that had the job j.
func (in Input) firstSeen(j Job) time.Time {
	for _, s := range in.Samples {
		if slices.ContainsFunc(s.Jobs, func(o Job) bool { return o.ID == j.ID && o.Unit == j.Unit }) {
			return s.At
		}
	}
	return in.Samples[len(in.Samples)-1].At
}

// cycling: the unit's active state or invocation changed in two or more cycle-watch
// windows.
func (in Input) cycling(name string) bool {
	changed := 0
	for i := max(in.CycleStart, 0) + 1; i < len(in.Samples); i++ {
		a, okA := in.Samples[i-1].Units[name]
		b, okB := in.Samples[i].Units[name]
		if okA && okB && Changed(a, b) {
			changed++
		}
	}
	return changed >= 2
}

// Changed: the unit's active state or invocation differs between two samples a and
// b, by what both samples read of it. Every unit has its active state; the exported
// invocation (the cheap view) is compared when both listed the unit, and the
// InvocationID property when both read it in full. A unit read in full in one sample
// and not in the other is never compared by InvocationID against its exported ID:
// systemd removes the export when the unit goes inactive and keeps the property.
func Changed(a, b Unit) bool {
	switch {
	case a.ActiveState != b.ActiveState:
		return true
	case a.Listed && b.Listed && a.ExportedInvocation != b.ExportedInvocation:
		return true
	case a.Full && b.Full && a.InvocationID != b.InvocationID:
		return true
	}
	return false
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
		if age := final.At.Sub(in.firstSeen(j)); age >= in.SettleWindow {
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
