package verdict_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/verdict"
)

func TestDecide(t *testing.T) {
	read := empty()
	withFailed := empty()
	withFailed.Failed = []string{"a.service", "b.service"}
	loops := empty()
	loops.RestartLoops = []verdict.Loop{{Unit: "u.service", Restarts: 9, BudgetS: 30, OverBudget: true}, {Unit: "w.service", Restarts: 2, BudgetS: 600}}
	inBudget := empty()
	inBudget.RestartLoops = []verdict.Loop{{Unit: "w.service", Restarts: 2, BudgetS: 600}}
	okSwitch := verdict.Switch{Result: verdict.SwitchOK}
	tests := []struct {
		name    string
		v       verdict.Verdict
		exit    int
		reasons []string
	}{
		{name: "healthy", v: verdict.Verdict{Reachable: true, Switch: okSwitch, Units: read, StrictUnits: true}, exit: 0, reasons: []string{}},
		{name: "unreachable", v: verdict.Verdict{Units: verdict.Classes{}, StrictUnits: true}, exit: 3, reasons: []string{"unreachable"}},
		{name: "unreachable wins over everything", v: verdict.Verdict{Switch: verdict.Switch{Result: verdict.SwitchError, ExitCode: 1}, Units: withFailed, StrictUnits: true},
			exit: 3, reasons: []string{"unreachable"}},
		{name: "switch error", v: verdict.Verdict{Reachable: true, Switch: verdict.Switch{Result: verdict.SwitchError, ExitCode: 2}, Units: read},
			exit: 1, reasons: []string{"switch error (exit 2)"}},
		{name: "never confirmed", v: verdict.Verdict{Reachable: true, Switch: verdict.Switch{Result: verdict.SwitchNeverConfirmed}, Units: read},
			exit: 1, reasons: []string{"switch never confirmed"}},
		{name: "reboot needed is no failure", v: verdict.Verdict{Reachable: true, Switch: verdict.Switch{Result: verdict.SwitchRebootNeeded, ExitCode: 100}, Units: read},
			exit: 0, reasons: []string{}},
		{name: "failed units, strict", v: verdict.Verdict{Reachable: true, Switch: verdict.Switch{Result: verdict.SwitchUnitsFailed, ExitCode: 4}, Units: withFailed, StrictUnits: true},
			exit: 1, reasons: []string{"failed unit: a.service", "failed unit: b.service"}},
		{name: "failed units, not strict", v: verdict.Verdict{Reachable: true, Switch: verdict.Switch{Result: verdict.SwitchUnitsFailed, ExitCode: 4}, Units: withFailed},
			exit: 0, reasons: []string{}},
		{name: "loop over budget, deploy pass", v: verdict.Verdict{Reachable: true, Pass: verdict.PassDeploy, Switch: okSwitch, Units: loops, StrictUnits: true},
			exit: 0, reasons: []string{}},
		{name: "loop over budget, verdict-only pass", v: verdict.Verdict{Reachable: true, Pass: verdict.PassVerdictOnly, Switch: verdict.Switch{Result: verdict.SwitchSkipped}, Units: loops, StrictUnits: true},
			exit: 1, reasons: []string{"restart loop: u.service (9 restarts, budget 30s)"}},
		{name: "loop within budget, verdict-only pass", v: verdict.Verdict{Reachable: true, Pass: verdict.PassVerdictOnly, Switch: verdict.Switch{Result: verdict.SwitchSkipped}, Units: inBudget, StrictUnits: true},
			exit: 0, reasons: []string{}},
		{name: "state not read on a reachable node", v: verdict.Verdict{Reachable: true, Switch: okSwitch, Units: verdict.Classes{}, StrictUnits: true},
			exit: 3, reasons: []string{"systemd state not read"}},
		{name: "not read and switch error: the highest code, both reasons", v: verdict.Verdict{Reachable: true, Switch: verdict.Switch{Result: verdict.SwitchError, ExitCode: 1}},
			exit: 3, reasons: []string{"switch error (exit 1)", "systemd state not read"}},
		{name: "several failures add up", v: verdict.Verdict{Reachable: true, Pass: verdict.PassVerdictOnly, Switch: verdict.Switch{Result: verdict.SwitchNeverConfirmed},
			Units: func() verdict.Classes { c := loops; c.Failed = []string{"a.service"}; return c }(), StrictUnits: true},
			exit: 1, reasons: []string{"switch never confirmed", "failed unit: a.service", "restart loop: u.service (9 restarts, budget 30s)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, exit, reasons := verdict.Decide(tc.v)
			if exit != tc.exit || ok != (tc.exit == 0) {
				t.Errorf("Decide = ok %v, exit %d; want exit %d", ok, exit, tc.exit)
			}
			if diff := cmp.Diff(tc.reasons, reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}

// specExample is the verdict of SPEC 4.5's examples.
func specExample() verdict.Verdict {
	state := "degraded"
	c := empty()
	c.Failed = []string{"nginx.service"}
	c.RestartLoops = []verdict.Loop{{Unit: "worker.service", Restarts: 7, BudgetS: 600}}
	c.SetAside = []string{"old-cron.service"}
	v := verdict.Verdict{Node: "web1", Target: "ssh root@192.0.2.10:22", Pass: verdict.PassDeploy, Reachable: true,
		Toplevel: "/nix/store/new", Previous: "/nix/store/old", Switch: verdict.Switch{Result: verdict.SwitchOK},
		SystemState: &state, Units: c, StrictUnits: true, BootEntry: "/nix/store/new",
		PhasesMS: map[string]int64{"build": 0, "push": 812, "switch": 2100}}
	v.OK, v.ExitCode, v.Reasons = verdict.Decide(v)
	return v
}

// The text block exactly as SPEC 4.5 shows it.
func TestWriteTextSpecExample(t *testing.T) {
	want := `Deploy verdict for web1 (ssh root@192.0.2.10:22):
  pass:            deploy
  switch:          ok (exit 0)
  system state:    degraded
  failed:          nginx.service
  restart loops:   worker.service (7 restarts, budget 600s)
  cycling:         <none>
  stale jobs:      <none>
  pending:         <none>
  spawn faults:    <none>
  set aside:       old-cron.service
  skipped:         <none>
  not restarted:   <none>
  strict units:    on
  result:          FAILED: 1 failed unit
`
	var b bytes.Buffer
	if err := specExample().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("WriteText (-want +got):\n%s", diff)
	}
}

func TestWriteTextLines(t *testing.T) {
	c := empty()
	c.StaleJobs = []verdict.StaleJob{{Unit: "x.service", Job: "start", AgeS: 120}}
	c.SpawnFaults = []verdict.SpawnFault{{Unit: "y.service", Stage: verdict.StageStartPre, Status: "219/CGROUP"},
		{Unit: "z.service", Stage: verdict.StageNone, Status: verdict.StatusResources}}
	c.Pending = []verdict.Pending{{Unit: "slow.service", State: "activating/start", AgeS: 42}}
	c.RestartLoops = []verdict.Loop{{Unit: "a.service", Restarts: 1, BudgetS: 30, OverBudget: true}}
	c.Failed = []string{"a.service", "b.service"}
	c.NotRestarted = []string{"keeper.service", "echo.service"}
	v := verdict.Verdict{Node: "n", Target: "t", Pass: verdict.PassVerdictOnly, Reachable: true,
		Switch: verdict.Switch{Result: verdict.SwitchUnchanged}, Units: c,
		Reasons: []string{"chain gate: secret-agent.service failed"}}
	v.OK, v.ExitCode, _ = verdict.Decide(v)
	var b bytes.Buffer
	if err := v.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  switch:          unchanged\n",
		"  system state:    <not read>\n",
		"  failed:          a.service, b.service\n",
		"  restart loops:   a.service (1 restart, budget 30s, over budget)\n",
		"  stale jobs:      x.service (start job, 120s)\n",
		"  pending:         slow.service (activating/start, 42s)\n",
		"  spawn faults:    y.service (ExecStartPre 219/CGROUP), z.service (resources)\n",
		"  not restarted:   keeper.service, echo.service\n",
		"  strict units:    off\n",
		"  result:          FAILED: restart loop over budget: a.service; chain gate: secret-agent.service failed; not settled: 1 unit still starting\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	v.StrictUnits = true
	v.Switch = verdict.Switch{Result: verdict.SwitchNeverConfirmed}
	v.OK, v.ExitCode, _ = verdict.Decide(v)
	b.Reset()
	_ = v.WriteText(&b)
	if want := "  result:          FAILED: switch never confirmed; 2 failed units; restart loop over budget: a.service; chain gate: secret-agent.service failed; not settled: 1 unit still starting\n"; !strings.Contains(b.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, b.String())
	}
	// Pending units alone never fail the node; the result still says it had not settled.
	v = verdict.Verdict{Node: "n", Target: "t", Pass: verdict.PassDeploy, Reachable: true, StrictUnits: true,
		Switch: verdict.Switch{Result: verdict.SwitchOK}, Units: empty()}
	v.Units.Pending = c.Pending
	v.OK, v.ExitCode, v.Reasons = verdict.Decide(v)
	b.Reset()
	_ = v.WriteText(&b)
	if want := "  result:          ok, not settled: 1 unit still starting\n"; !v.OK || !strings.Contains(b.String(), want) {
		t.Errorf("ok %v; text lacks %q:\n%s", v.OK, want, b.String())
	}
}

// The JSON event: every key present, in the spec's order, lists null only when not read.
func TestVerdictJSON(t *testing.T) {
	b, err := json.Marshal(specExample())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"verdict","node":"web1","target":"ssh root@192.0.2.10:22","pass":"deploy","reachable":true,` +
		`"toplevel":"/nix/store/new","previous":"/nix/store/old","switch":{"result":"ok","exit_code":0},"system_state":"degraded",` +
		`"units":{"failed":["nginx.service"],"restart_loops":[{"unit":"worker.service","restarts":7,"budget_s":600,"over_budget":false,"looping_s":0}],` +
		`"cycling":[],"stale_jobs":[],"spawn_faults":[],"set_aside":["old-cron.service"],"condition_skipped":[],"pending":[],"not_restarted":[]},` +
		`"strict_units":true,"boot_entry":"/nix/store/new","ok":false,"exit_code":1,"reasons":["failed unit: nginx.service"],` +
		`"phases_ms":{"build":0,"push":812,"switch":2100}}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}

	b, err = json.Marshal(verdict.Verdict{Node: "web1"})
	if err != nil {
		t.Fatal(err)
	}
	want = `{"kind":"verdict","node":"web1","target":"","pass":"","reachable":false,"toplevel":"","previous":"",` +
		`"switch":{"result":"","exit_code":0},"system_state":null,"units":{"failed":null,"restart_loops":null,"cycling":null,` +
		`"stale_jobs":null,"spawn_faults":null,"set_aside":null,"condition_skipped":null,"pending":null,"not_restarted":null},"strict_units":false,"boot_entry":"",` +
		`"ok":false,"exit_code":0,"reasons":[],"phases_ms":{}}`
	if diff := cmp.Diff(want, string(b)); diff != "" {
		t.Errorf("JSON of an empty verdict (-want +got):\n%s", diff)
	}
}
