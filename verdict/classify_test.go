package verdict_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/verdict"
)

var t0 = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)

// sample builds a sample at node time now (seconds after t0) with the given units,
// read in full unless a unit says it is only listed.
func sample(now int64, units ...verdict.Unit) verdict.Sample {
	s := verdict.Sample{At: t0.Add(time.Duration(now) * time.Second), NodeNow: t0.Unix() + now,
		SystemState: "running", Units: map[string]verdict.Unit{}, Jobs: []verdict.Job{}}
	for _, u := range units {
		if !u.Listed {
			u.Full = true
		}
		s.Units[u.Name] = u
	}
	return s
}

func withJobs(s verdict.Sample, jobs ...verdict.Job) verdict.Sample {
	s.Jobs = jobs
	return s
}

func active(name, inv string) verdict.Unit {
	return verdict.Unit{Name: name, LoadState: "loaded", ActiveState: "active", SubState: "running", InvocationID: inv, ConditionResult: "yes", ConditionAt: 1}
}

func failed(name string, code, status int) verdict.Unit {
	return verdict.Unit{Name: name, LoadState: "loaded", ActiveState: "failed", SubState: "failed", Result: "exit-code",
		ExecMainCode: code, ExecMainStatus: status, InvocationID: "f", ConditionResult: "yes", ConditionAt: 1}
}

func restarting(name string, n int, env ...string) verdict.Unit {
	return verdict.Unit{Name: name, LoadState: "loaded", ActiveState: "activating", SubState: "auto-restart", Result: "exit-code",
		NRestarts: n, ExecMainCode: 1, ExecMainStatus: 1, ConditionResult: "yes", ConditionAt: 1, Environment: env}
}

func running(name string, n int, inv string, env ...string) verdict.Unit {
	u := active(name, inv)
	u.NRestarts, u.Environment = n, env
	return u
}

// upSince sets when the unit last became active, in seconds after t0 (node clock).
func upSince(u verdict.Unit, at int64) verdict.Unit {
	u.ActiveEnter = t0.Unix() + at
	return u
}

func loaded(name, load string) verdict.Unit {
	return verdict.Unit{Name: name, LoadState: load, ActiveState: "inactive", SubState: "dead", ConditionResult: "no"}
}

// empty are the classes of a node read with nothing to report.
func empty() verdict.Classes {
	return verdict.Classes{Failed: []string{}, RestartLoops: []verdict.Loop{}, Cycling: []string{},
		StaleJobs: []verdict.StaleJob{}, SpawnFaults: []verdict.SpawnFault{}, SetAside: []string{}, ConditionSkipped: []string{},
		Pending: []verdict.Pending{}, NotRestarted: []string{}}
}

func TestClassify(t *testing.T) {
	owned := map[string]bool{"web.service": true, "worker.service": true, "getty@.service": true, "skip.service": true}
	wanted := map[string]bool{"web.service": true, "dep.service": true, "ghost.service": true, "maybe.service": true}
	base := verdict.Input{Pass: verdict.PassDeploy, Owned: owned, Wanted: wanted, Activated: t0.Unix(),
		LoopGrace: 600 * time.Second, SettleWindow: 30 * time.Second}
	with := func(edit func(c *verdict.Classes)) verdict.Classes {
		c := empty()
		edit(&c)
		return c
	}
	tests := []struct {
		name    string
		samples []verdict.Sample
		cycle   int
		edit    func(in *verdict.Input)
		want    verdict.Classes
	}{
		{name: "no samples: not read", want: verdict.Classes{}},
		{name: "final units not read", samples: []verdict.Sample{sample(1, active("web.service", "a")), {At: t0}}, want: verdict.Classes{}},
		{name: "healthy", samples: []verdict.Sample{sample(1, active("web.service", "a"))}, want: empty()},
		{
			name:    "owned failed unit fails, foreign failed unit is set aside",
			samples: []verdict.Sample{sample(1, failed("web.service", 1, 3), failed("old-cron.service", 1, 1))},
			want: with(func(c *verdict.Classes) {
				c.Failed = []string{"web.service"}
				c.SetAside = []string{"old-cron.service"}
			}),
		},
		{
			name:    "instance of an owned template is owned",
			samples: []verdict.Sample{sample(1, failed("getty@tty1.service", 1, 1))},
			want:    with(func(c *verdict.Classes) { c.Failed = []string{"getty@tty1.service"} }),
		},
		{
			name:    "wanted but not owned failed unit is set aside",
			samples: []verdict.Sample{sample(1, failed("dep.service", 1, 1))},
			want:    with(func(c *verdict.Classes) { c.SetAside = []string{"dep.service"} }),
		},
		{
			name: "load errors of owned or wanted units, not-found only when wanted",
			samples: []verdict.Sample{sample(1, loaded("worker.service", "bad-setting"), loaded("dep.service", "error"),
				loaded("ghost.service", "not-found"), loaded("NetworkManager.service", "not-found"), loaded("stray.service", "bad-setting"))},
			want: with(func(c *verdict.Classes) {
				c.Failed = []string{"dep.service", "ghost.service", "worker.service"}
			}),
		},
		{
			name:    "spawn faults are never failed nor set aside",
			samples: []verdict.Sample{sample(1, failed("web.service", 1, 219), failed("other.service", 1, 226), restarting("worker.service", 3))},
			edit: func(in *verdict.Input) {
				in.Samples[0].Units["worker.service"] = func(u verdict.Unit) verdict.Unit { u.ExecMainStatus = 214; return u }(in.Samples[0].Units["worker.service"])
			},
			want: with(func(c *verdict.Classes) {
				c.SpawnFaults = []verdict.SpawnFault{{Unit: "other.service", Stage: "ExecStart", Status: "226/NAMESPACE"},
					{Unit: "web.service", Stage: "ExecStart", Status: "219/CGROUP"}, {Unit: "worker.service", Stage: "ExecStart", Status: "214/SETSCHEDULER"}}
			}),
		},
		{
			name: "closure-caused exec-stage statuses stay failed",
			samples: []verdict.Sample{sample(1, failed("web.service", 1, 203), failed("worker.service", 1, 217),
				failed("getty@tty1.service", 2, 219))}, // killed by signal 219? not an exec-stage status
			want: with(func(c *verdict.Classes) {
				c.Failed = []string{"getty@tty1.service", "web.service", "worker.service"}
			}),
		},
		{
			name: "spawn-fault status on a running unit is no fault",
			samples: []verdict.Sample{sample(1, func() verdict.Unit {
				u := active("web.service", "a")
				u.ExecMainCode, u.ExecMainStatus = 1, 219
				return u
			}())},
			want: empty(),
		},
		{
			name: "condition skipped: owned or wanted, checked, inactive",
			samples: []verdict.Sample{sample(1,
				verdict.Unit{Name: "skip.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead", ConditionResult: "no", ConditionAt: 5},
				verdict.Unit{Name: "maybe.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead", ConditionResult: "no"}, // never checked
				verdict.Unit{Name: "systemd-repart.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead", ConditionResult: "no", ConditionAt: 5},
			)},
			want: with(func(c *verdict.Classes) { c.ConditionSkipped = []string{"skip.service"} }),
		},
		{
			name: "restart loop within budget",
			samples: []verdict.Sample{
				sample(2, running("worker.service", 1, "a")), sample(6, restarting("worker.service", 3)),
				sample(10, running("worker.service", 5, "c")), sample(14, running("worker.service", 7, "d")),
			},
			want: with(func(c *verdict.Classes) {
				c.RestartLoops = []verdict.Loop{{Unit: "worker.service", Restarts: 7, BudgetS: 600, LoopingS: 14}}
			}),
		},
		{
			name: "own budget from Environment, over it",
			samples: []verdict.Sample{
				sample(10, running("worker.service", 1, "a", "DEPLOY_LOOP_BUDGET=30")),
				sample(20, running("worker.service", 4, "b", "DEPLOY_LOOP_BUDGET=30")),
				sample(31, running("worker.service", 7, "c", "A=b c", "DEPLOY_LOOP_BUDGET=30")),
			},
			want: with(func(c *verdict.Classes) {
				c.RestartLoops = []verdict.Loop{{Unit: "worker.service", Restarts: 7, BudgetS: 30, OverBudget: true, LoopingS: 31}}
			}),
		},
		{
			name: "looping time counts from the end of the last stable active period",
			samples: []verdict.Sample{
				sample(10, upSince(running("worker.service", 0, "a", "DEPLOY_LOOP_BUDGET=30"), -50)),
				sample(20, upSince(running("worker.service", 0, "a", "DEPLOY_LOOP_BUDGET=30"), -50)), // up 70 s: stable until here
				sample(30, restarting("worker.service", 2, "DEPLOY_LOOP_BUDGET=30")),
				sample(45, upSince(running("worker.service", 5, "b", "DEPLOY_LOOP_BUDGET=30"), 44)),
			},
			// 45-20 = 25 s looping: within 30 s although 45 s since the activation
			want: with(func(c *verdict.Classes) {
				c.RestartLoops = []verdict.Loop{{Unit: "worker.service", Restarts: 5, BudgetS: 30, LoopingS: 25}}
			}),
		},
		{
			name: "a unit seen up twice within a short run is not stable",
			samples: []verdict.Sample{
				sample(30, upSince(running("worker.service", 4, "a", "DEPLOY_LOOP_BUDGET=30"), 29)),
				sample(31, upSince(running("worker.service", 4, "a", "DEPLOY_LOOP_BUDGET=30"), 29)), // one invocation, up 2 s
				sample(33, restarting("worker.service", 5, "DEPLOY_LOOP_BUDGET=30")),
				sample(35, restarting("worker.service", 6, "DEPLOY_LOOP_BUDGET=30")),
			},
			// looping since the activation (0): 35 s, over the 30 s budget
			want: with(func(c *verdict.Classes) {
				c.RestartLoops = []verdict.Loop{{Unit: "worker.service", Restarts: 6, BudgetS: 30, OverBudget: true, LoopingS: 35}}
			}),
		},
		{
			name: "one restart is a crash, not a loop",
			samples: []verdict.Sample{
				sample(1, running("worker.service", 0, "a")), sample(2, running("worker.service", 1, "b")),
				sample(3, restarting("web.service", 1)), sample(4, running("worker.service", 1, "b")),
			},
			want: empty(),
		},
		{
			name: "a loop that hit its start limit is failed, not a loop",
			samples: []verdict.Sample{
				sample(1, restarting("worker.service", 2)), sample(2, restarting("worker.service", 4)),
				sample(3, func() verdict.Unit {
					u := failed("worker.service", 1, 1)
					u.NRestarts = 5
					u.Result = "start-limit-hit"
					return u
				}()),
			},
			want: with(func(c *verdict.Classes) { c.Failed = []string{"worker.service"} }),
		},
		{
			name: "cycling: changes in two cycle-watch windows; loops and changes before the watch do not count",
			samples: []verdict.Sample{
				sample(1, active("tick.service", "a"), active("flap.service", "z"), active("once.service", "1")),
				sample(2, active("tick.service", "b"), active("flap.service", "y"), active("once.service", "1")),
				sample(3, active("tick.service", "b"), active("flap.service", "x"), active("once.service", "1")),
				sample(4, active("tick.service", "c"), active("flap.service", "x"), active("once.service", "2")),
				sample(5, active("tick.service", "d"), active("flap.service", "x"), active("once.service", "2")),
			},
			cycle: 2, // windows 2-3, 3-4, 4-5: tick changes in two, flap in none, once in one
			want:  with(func(c *verdict.Classes) { c.Cycling = []string{"tick.service"} }),
		},
		{
			name: "cycling by active state alone",
			samples: []verdict.Sample{
				sample(1, active("tick.service", "a")),
				sample(2, verdict.Unit{Name: "tick.service", ActiveState: "inactive", InvocationID: "a"}),
				sample(3, active("tick.service", "a")),
			},
			want: with(func(c *verdict.Classes) { c.Cycling = []string{"tick.service"} }),
		},
		{
			name: "stale start jobs are aged from the first sample that had them",
			samples: []verdict.Sample{
				withJobs(sample(0, active("web.service", "a")), verdict.Job{ID: 7, Unit: "slow.service", Type: "start", Stat: "running"}),
				withJobs(sample(20, active("web.service", "a")), verdict.Job{ID: 7, Unit: "slow.service", Type: "start", Stat: "running"},
					verdict.Job{ID: 9, Unit: "late.service", Type: "start", Stat: "waiting"}),
				withJobs(sample(40, active("web.service", "a")), verdict.Job{ID: 7, Unit: "slow.service", Type: "start", Stat: "running"},
					verdict.Job{ID: 9, Unit: "late.service", Type: "start", Stat: "waiting"},
					verdict.Job{ID: 11, Unit: "x.service", Type: "stop", Stat: "waiting"}),
			},
			want: with(func(c *verdict.Classes) {
				c.StaleJobs = []verdict.StaleJob{{Unit: "slow.service", Job: "start", AgeS: 40}}
			}),
		},
		{
			name:    "jobs not read",
			samples: []verdict.Sample{withJobs(sample(1, active("web.service", "a")))},
			want:    with(func(c *verdict.Classes) { c.StaleJobs, c.Pending = nil, nil }),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			in.Samples, in.CycleStart = tc.samples, tc.cycle
			if tc.edit != nil {
				tc.edit(&in)
			}
			if diff := cmp.Diff(tc.want, verdict.Classify(in)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}

// inactive is a unit down with its last invocation inv kept (systemd keeps
// InvocationID while a unit is inactive).
func inactive(name, inv string) verdict.Unit {
	return verdict.Unit{Name: name, LoadState: "loaded", ActiveState: "inactive", SubState: "dead", InvocationID: inv, ConditionResult: "yes", ConditionAt: 1}
}

// socketActivated is a service its socket starts.
func socketActivated(u verdict.Unit, socket string) verdict.Unit {
	u.TriggeredBy = []string{socket}
	return u
}

func needsReload(u verdict.Unit) verdict.Unit {
	u.NeedReload = true
	return u
}

// Issue 32 item 4: what switch-to-configuration-ng leaves not in effect, and the
// failures its reset-failed clears. The activation is at t0; the snapshot (Before) is
// taken before it.
func TestClassifyWhatTheSwitchLeft(t *testing.T) {
	owned := map[string]bool{"web.service": true, "keeper.service": true, "echo.service": true, "echo.socket": true}
	base := verdict.Input{Pass: verdict.PassDeploy, Owned: owned, Activated: t0.Unix(),
		LoopGrace: 600 * time.Second, SettleWindow: 30 * time.Second}
	with := func(edit func(c *verdict.Classes)) verdict.Classes {
		c := empty()
		edit(&c)
		return c
	}
	listedOnly := func(u verdict.Unit) verdict.Unit { u.Listed, u.InvocationID = true, ""; return u }
	echoStopped := verdict.SwitchLog{Stopped: []string{"echo.service", "echo.socket"}, Started: []string{"echo.socket"}}
	tests := []struct {
		name   string
		before verdict.Sample
		final  verdict.Sample
		log    verdict.SwitchLog
		want   verdict.Classes
	}{
		{
			name:   "failed before the switch, reset by it, not run since: failed when owned, else set aside",
			before: sample(-5, failed("web.service", 1, 3), failed("old-cron.service", 1, 1)),
			final:  sample(5, inactive("web.service", "f"), inactive("old-cron.service", "f")),
			want: with(func(c *verdict.Classes) {
				c.Failed = []string{"web.service"}
				c.SetAside = []string{"old-cron.service"}
			}),
		},
		{
			name:   "failed before the switch, reset and unloaded by systemd (nothing references it): failed when owned, else set aside",
			before: sample(-5, failed("web.service", 1, 3), failed("old-cron.service", 1, 1), failed("gone.service", 1, 1)),
			final:  sample(5, inactive("gone.service", "g")),
			want: with(func(c *verdict.Classes) {
				c.Failed = []string{"web.service"}
				c.SetAside = []string{"old-cron.service"}
			}),
		},
		{
			name:   "failed before the switch and run again since: judged as it is now",
			before: sample(-5, failed("web.service", 1, 3)),
			final:  sample(5, inactive("web.service", "g")),
			want:   empty(),
		},
		{
			name:   "failed before the switch, but either sample did not read the invocation: not judged from it",
			before: sample(-5, listedOnly(failed("web.service", 1, 3))),
			final:  sample(5, inactive("web.service", "f")),
			want:   empty(),
		},
		{
			name:   "failed before, only listed after: not judged from it",
			before: sample(-5, failed("web.service", 1, 3)),
			final:  sample(5, listedOnly(inactive("web.service", "f"))),
			want:   empty(),
		},
		{
			name:  "named by the switch as not restarted and up since before the activation",
			final: sample(5, upSince(active("keeper.service", "a"), -100), upSince(active("foreign.service", "b"), -100)),
			log:   verdict.SwitchLog{NotRestarted: []string{"keeper.service", "foreign.service"}},
			want:  with(func(c *verdict.Classes) { c.NotRestarted = []string{"keeper.service"} }),
		},
		{
			name:  "named by the switch, but restarted since the activation: its new definition runs",
			final: sample(5, upSince(active("keeper.service", "a"), 2)),
			log:   verdict.SwitchLog{NotRestarted: []string{"keeper.service"}},
			want:  empty(),
		},
		{
			name:  "up since before the activation, not named by the switch: not restarted because unchanged",
			final: sample(5, upSince(active("keeper.service", "a"), -100)),
			want:  empty(),
		},
		{
			name:  "NeedDaemonReload on a running owned unit, without any switch log; not on a stopped one",
			final: sample(5, needsReload(active("keeper.service", "a")), needsReload(inactive("web.service", "w"))),
			want:  with(func(c *verdict.Classes) { c.NotRestarted = []string{"keeper.service"} }),
		},
		{
			name:  "socket-activated service stopped by the switch, not started, socket up: judged by its socket",
			final: sample(5, socketActivated(inactive("echo.service", "e"), "echo.socket"), active("echo.socket", "s")),
			log:   echoStopped,
			want:  with(func(c *verdict.Classes) { c.NotRestarted = []string{"echo.service"} }),
		},
		{
			name:  "socket-activated service started by a connection since: its new definition runs",
			final: sample(5, socketActivated(active("echo.service", "e2"), "echo.socket"), active("echo.socket", "s")),
			log:   echoStopped,
			want:  empty(),
		},
		{
			name: "socket-activated service whose socket failed: the socket is the failed unit",
			final: sample(5, socketActivated(inactive("echo.service", "e"), "echo.socket"),
				verdict.Unit{Name: "echo.socket", LoadState: "loaded", ActiveState: "failed", SubState: "failed", Result: "trigger-limit-hit", InvocationID: "s"}),
			log:  echoStopped,
			want: with(func(c *verdict.Classes) { c.Failed = []string{"echo.socket"} }),
		},
		{
			name:  "a stopped service without a socket is no socket-activated service",
			final: sample(5, inactive("web.service", "w")),
			log:   verdict.SwitchLog{Stopped: []string{"web.service"}},
			want:  empty(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			in.Samples, in.Before, in.Switch = []verdict.Sample{tc.final}, tc.before, tc.log
			if diff := cmp.Diff(tc.want, verdict.Classify(in)); diff != "" {
				t.Errorf("Classify (-want +got):\n%s", diff)
			}
		})
	}
}
