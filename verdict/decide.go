package verdict

import (
	"fmt"
	"strings"

	"github.com/switchyard-nix/switchyard/exitcode"
)

// SwitchResult is what the switch did, one of SPEC 4.5's words.
type SwitchResult string

// Switch results of SPEC 4.5.
const (
	SwitchOK             SwitchResult = "ok"
	SwitchUnitsFailed    SwitchResult = "units-failed"
	SwitchRebootNeeded   SwitchResult = "reboot-needed"
	SwitchError          SwitchResult = "error"
	SwitchNeverConfirmed SwitchResult = "never-confirmed"
	// SwitchRolledBack: the activation took effect but the deployer's confirmation
	// over a fresh connection did not reach the node in DEPLOY_CONFIRM_TIMEOUT, so
	// the node switched itself back to the generation it ran before (SPEC 4.6).
	SwitchRolledBack SwitchResult = "rolled-back"
	SwitchSkipped    SwitchResult = "skipped"
	SwitchUnchanged  SwitchResult = "unchanged"
	// SwitchHeld: a staged rollout stopped before the node; nothing on it was
	// changed or read, and the caller's reason says where the rollout stopped.
	SwitchHeld SwitchResult = "held"
	// SwitchBoot: apply --mode boot set the system profile and the default boot
	// entry and activated nothing; the node is not judged.
	SwitchBoot SwitchResult = "boot"
)

// finding is one reason a node fails: its exit code, the reasons it adds to the
// verdict, and its part of the one-line text summary.
type finding struct {
	code    int
	reasons []string
	summary string
}

// findings are the reasons the node fails, in the order the report names them.
func findings(v Verdict) []finding {
	if v.Switch.Result == SwitchHeld {
		return []finding{{code: exitcode.Verdict}}
	}
	if !v.Reachable {
		return []finding{{exitcode.Infra, []string{"unreachable"}, "unreachable"}}
	}
	var fs []finding
	switch v.Switch.Result {
	case SwitchError:
		r := fmt.Sprintf("switch error (exit %d)", v.Switch.ExitCode)
		fs = append(fs, finding{exitcode.Verdict, []string{r}, r})
	case SwitchNeverConfirmed:
		r := "switch never confirmed"
		fs = append(fs, finding{exitcode.Verdict, []string{r}, r})
	case SwitchRolledBack:
		r := "switch rolled back: not confirmed over a fresh connection"
		fs = append(fs, finding{exitcode.Verdict, []string{r}, r})
	}
	if n := len(v.Units.Failed); n > 0 && v.StrictUnits {
		f := finding{code: exitcode.Verdict, summary: plural(n, "failed unit")}
		for _, u := range v.Units.Failed {
			f.reasons = append(f.reasons, "failed unit: "+u)
		}
		fs = append(fs, f)
	}
	if v.Pass == PassVerdictOnly {
		f := finding{code: exitcode.Verdict}
		var names []string
		for _, l := range v.Units.RestartLoops {
			if l.OverBudget {
				f.reasons = append(f.reasons, fmt.Sprintf("restart loop: %s (%s, budget %ds)",
					l.Unit, plural(l.Restarts, "restart"), l.BudgetS))
				names = append(names, l.Unit)
			}
		}
		if len(names) > 0 {
			f.summary = "restart loop over budget: " + strings.Join(names, ", ")
			fs = append(fs, f)
		}
	}
	if v.Units.unread() {
		r := "systemd state not read"
		fs = append(fs, finding{exitcode.Infra, []string{r}, r})
	}
	return fs
}

// unread reports whether any class could not be read.
func (c Classes) unread() bool {
	return c.Failed == nil || c.RestartLoops == nil || c.Cycling == nil || c.StaleJobs == nil ||
		c.SpawnFaults == nil || c.SetAside == nil || c.ConditionSkipped == nil || c.Pending == nil ||
		c.NotRestarted == nil
}

// Decide judges the node from its verdict's facts (SPEC 2.1, 4.2, 4.5): the exit
// code is the highest of its findings, ok is exactly exit code 0, and reasons name
// every finding (never nil). Failed units tolerated by DEPLOY_STRICT_UNITS=0 stay
// listed in the classes but are no reason; a restart loop fails only the
// verdict-only pass, and only once over its budget.
func Decide(v Verdict) (ok bool, exitCode int, reasons []string) {
	reasons = []string{}
	for _, f := range findings(v) {
		exitCode = max(exitCode, f.code)
		reasons = append(reasons, f.reasons...)
	}
	return exitCode == exitcode.OK, exitCode, reasons
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
