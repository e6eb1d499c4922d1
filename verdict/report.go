package verdict

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Switch is what the switch did: its result (SwitchOK, SwitchUnitsFailed, ...) and
// switch-to-configuration's exit status.
type Switch struct {
	Result   SwitchResult `json:"result"` // ok|units-failed|reboot-needed|error|never-confirmed|rolled-back|skipped|unchanged|held
	ExitCode int          `json:"exit_code"`
}

// Verdict is one node's verdict, the `verdict` event of SPEC 4.5. Every key is
// always present in JSON: a class that could not be read is null, reasons is [].
type Verdict struct {
	Kind        string           `json:"kind"` // always "verdict"
	Node        string           `json:"node"`
	Target      string           `json:"target"`
	Pass        Pass             `json:"pass"`
	Reachable   bool             `json:"reachable"`
	Toplevel    string           `json:"toplevel"`
	Previous    string           `json:"previous"`
	Switch      Switch           `json:"switch"`
	SystemState *string          `json:"system_state"` // null when not read
	Units       Classes          `json:"units"`
	StrictUnits bool             `json:"strict_units"`
	BootEntry   string           `json:"boot_entry"`
	OK          bool             `json:"ok"`
	ExitCode    int              `json:"exit_code"`
	Reasons     []string         `json:"reasons"` // never null
	PhasesMS    map[string]int64 `json:"phases_ms"`
}

// MarshalJSON writes the event with its fixed parts filled in (kind "verdict",
// reasons [] and phases_ms {} rather than null), so no caller can emit a malformed one.
func (v Verdict) MarshalJSON() ([]byte, error) {
	type plain Verdict // without this method
	v.Kind = "verdict"
	if v.Reasons == nil {
		v.Reasons = []string{}
	}
	if v.PhasesMS == nil {
		v.PhasesMS = map[string]int64{}
	}
	if v.SystemState != nil && *v.SystemState == "" {
		v.SystemState = nil
	}
	return json.Marshal(plain(v))
}

// keyWidth is the column the values of the text block start at, after two spaces.
const keyWidth = 17

// WriteText writes the text block of SPEC 4.5. "<none>" is a list read and empty,
// "<not read>" one that could not be read; the two are never confused.
func (v Verdict) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Deploy verdict for %s (%s):\n", v.Node, v.Target)
	line := func(key, value string) { fmt.Fprintf(&b, "  %-*s%s\n", keyWidth, key+":", value) }
	line("pass", string(v.Pass))
	line("switch", switchText(v.Switch))
	state := "<not read>"
	if v.SystemState != nil && *v.SystemState != "" {
		state = *v.SystemState
	}
	line("system state", state)
	line("failed", list(v.Units.Failed, func(s string) string { return s }))
	line("restart loops", list(v.Units.RestartLoops, loopText))
	line("cycling", list(v.Units.Cycling, func(s string) string { return s }))
	line("stale jobs", list(v.Units.StaleJobs, func(j StaleJob) string {
		return fmt.Sprintf("%s (%s job, %ds)", j.Unit, j.Job, j.AgeS)
	}))
	line("pending", list(v.Units.Pending, func(p Pending) string {
		return fmt.Sprintf("%s (%s, %ds)", p.Unit, p.State, p.AgeS)
	}))
	line("spawn faults", list(v.Units.SpawnFaults, spawnFaultText))
	line("set aside", list(v.Units.SetAside, func(s string) string { return s }))
	line("skipped", list(v.Units.ConditionSkipped, func(s string) string { return s }))
	line("not restarted", list(v.Units.NotRestarted, func(s string) string { return s }))
	line("strict units", map[bool]string{true: "on", false: "off"}[v.StrictUnits])
	line("result", resultText(v))
	_, err := io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("write verdict of %s: %w", v.Node, err)
	}
	return nil
}

// list renders a class: comma-separated, "<none>" when read and empty, "<not read>" when nil.
func list[T any](items []T, text func(T) string) string {
	switch {
	case items == nil:
		return "<not read>"
	case len(items) == 0:
		return "<none>"
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = text(it)
	}
	return strings.Join(parts, ", ")
}

// spawnFaultText: "y.service (ExecStartPre 214/SETSCHEDULER)", "z.service (resources)".
func spawnFaultText(f SpawnFault) string {
	if f.Stage == StageNone {
		return fmt.Sprintf("%s (%s)", f.Unit, f.Status)
	}
	return fmt.Sprintf("%s (%s %s)", f.Unit, f.Stage, f.Status)
}

func loopText(l Loop) string {
	s := fmt.Sprintf("%s (%s, budget %ds", l.Unit, plural(l.Restarts, "restart"), l.BudgetS)
	if l.OverBudget {
		s += ", over budget"
	}
	return s + ")"
}

// switchText: "ok (exit 0)", "units-failed (exit 4)"; a switch that did not run
// (skipped, unchanged) has no exit status to show.
func switchText(s Switch) string {
	switch s.Result {
	case "":
		return "not run"
	case SwitchSkipped, SwitchUnchanged, SwitchHeld:
		return string(s.Result)
	case SwitchBoot:
		return "boot: the node runs the new generation after its next boot"
	case SwitchRebootNeeded:
		// The new boot entry is installed but not running: the operator must act.
		return fmt.Sprintf("%s (exit %d): the node must reboot to run the new generation", s.Result, s.ExitCode)
	}
	return fmt.Sprintf("%s (exit %d)", s.Result, s.ExitCode)
}

// resultText is "ok", or "FAILED: " and a short summary of why. Reasons a caller
// added beyond Decide's own (a failed chain gate) are named as they are.
//
// A node with pending units had not settled when the watch ended: that is said on
// the same line ("ok, not settled: 1 unit still starting"), never a failure itself.
func resultText(v Verdict) string {
	unsettled := ""
	if n := len(v.Units.Pending); n > 0 {
		unsettled = fmt.Sprintf("not settled: %s still starting", plural(n, "unit"))
	}
	if v.OK {
		if unsettled != "" {
			return "ok, " + unsettled
		}
		return "ok"
	}
	var parts, own []string
	for _, f := range findings(v) {
		if f.summary == "" {
			continue // a held node: its reason says it all
		}
		parts = append(parts, f.summary)
		own = append(own, f.reasons...)
	}
	for _, r := range v.Reasons {
		if !slices.Contains(own, r) {
			parts = append(parts, r)
		}
	}
	if len(parts) == 0 {
		parts = append(parts, fmt.Sprintf("exit %d", v.ExitCode))
	}
	if unsettled != "" {
		parts = append(parts, unsettled)
	}
	return "FAILED: " + strings.Join(parts, "; ")
}

// SystemStateOf is a sample's system state for Verdict.SystemState: nil when it
// could not be read.
func SystemStateOf(s Sample) *string {
	if s.SystemState == "" {
		return nil
	}
	state := s.SystemState
	return &state
}
