package verdict_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/verdict"
)

// at is node time, seconds after t0.
func at(s int64) int64 { return t0.Unix() + s }

// history builds a restart history: pairs of (seconds after t0, counter).
func history(pairs ...int64) []verdict.Restart {
	h := []verdict.Restart{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h = append(h, verdict.Restart{At: at(pairs[i]), Counter: int(pairs[i+1])})
	}
	return h
}

// cameBack is a unit up again since upAt after going down at downAt.
func cameBack(u verdict.Unit, downAt, upAt int64) verdict.Unit {
	u.ActiveExit, u.ActiveEnter = at(downAt), at(upAt)
	return u
}

// issue 11 item 3: loops are measured by systemd's restart records and timestamps,
// not by the share of samples that caught a restart.
func TestClassifyLoopsBySystemdsRecord(t *testing.T) {
	tests := []struct {
		name      string
		activated int64
		samples   []verdict.Sample
		restarts  map[string][]verdict.Restart
		want      []verdict.Loop
	}{
		{
			name: "a slow loop caught in one sample of many is a loop (up 20 s, crash, restart)",
			samples: []verdict.Sample{
				sample(5, upSince(running("slow.service", 0, "a"), 1)), sample(10, upSince(running("slow.service", 0, "a"), 1)),
				sample(15, upSince(running("slow.service", 0, "a"), 1)), sample(20, upSince(running("slow.service", 0, "a"), 1)),
				sample(25, cameBack(running("slow.service", 1, "b"), 21, 21)), sample(30, cameBack(running("slow.service", 1, "b"), 21, 21)),
				sample(35, cameBack(running("slow.service", 1, "b"), 21, 21)), sample(42, cameBack(running("slow.service", 2, "c"), 41, 41)),
			},
			restarts: map[string][]verdict.Restart{"slow.service": history(21, 1, 41, 2)},
			want:     []verdict.Loop{{Unit: "slow.service", Restarts: 2, BudgetS: 600, LoopingS: 21}},
		},
		{
			name:      "verdict-only: a loop that began after a long stable run counts from its own start",
			activated: -86400,
			samples: []verdict.Sample{
				sample(100, cameBack(running("late.service", 9, "x", "DEPLOY_LOOP_BUDGET=30"), 98, 99)),
				sample(104, restarting("late.service", 10, "DEPLOY_LOOP_BUDGET=30")),
			},
			// a day-old restart (counter 1), stable since; the loop began at 82
			restarts: map[string][]verdict.Restart{"late.service": history(-80000, 1, 83, 2, 85, 3, 87, 4, 89, 5, 91, 6, 93, 7, 95, 8, 97, 9, 99, 10)},
			want:     []verdict.Loop{{Unit: "late.service", Restarts: 10, BudgetS: 30, LoopingS: 22}},
		},
		{
			name:      "the same loop past its budget",
			activated: -86400,
			samples:   []verdict.Sample{sample(130, restarting("late.service", 10, "DEPLOY_LOOP_BUDGET=30"))},
			restarts:  map[string][]verdict.Restart{"late.service": history(-80000, 1, 83, 2, 85, 3, 87, 4, 89, 5, 91, 6, 93, 7, 95, 8, 97, 9, 99, 10)},
			want:      []verdict.Loop{{Unit: "late.service", Restarts: 10, BudgetS: 30, OverBudget: true, LoopingS: 47}},
		},
		{
			name: "a long restart delay is no stable period (RestartSec=300, crashing at once)",
			samples: []verdict.Sample{
				sample(1000, cameBack(running("slowretry.service", 3, "d"), 700, 999)),
			},
			restarts: map[string][]verdict.Restart{"slowretry.service": history(399, 1, 699, 2, 999, 3)},
			// the loop began when the run before the first restart ended: 399-299
			want: []verdict.Loop{{Unit: "slowretry.service", Restarts: 3, BudgetS: 600, OverBudget: true, LoopingS: 900}},
		},
		{
			name: "the restart delay from an earlier sample when the unit is down at the end",
			samples: []verdict.Sample{
				sample(1000, cameBack(running("slowretry.service", 3, "d"), 700, 999)),
				sample(1010, restarting("slowretry.service", 3)),
			},
			restarts: map[string][]verdict.Restart{"slowretry.service": history(399, 1, 699, 2, 999, 3)},
			want:     []verdict.Loop{{Unit: "slowretry.service", Restarts: 3, BudgetS: 600, OverBudget: true, LoopingS: 910}},
		},
		{
			name:     "records of an earlier counter (reset by a manual start) are not this loop",
			samples:  []verdict.Sample{sample(200, restarting("w.service", 2))},
			restarts: map[string][]verdict.Restart{"w.service": history(10, 1, 12, 2, 14, 3, 150, 1, 152, 2)},
			want:     []verdict.Loop{{Unit: "w.service", Restarts: 2, BudgetS: 600, LoopingS: 50}},
		},
		{
			name:     "one restart since the last stable period is a crash, not a loop",
			samples:  []verdict.Sample{sample(200, cameBack(running("w.service", 2, "b"), 150, 150))},
			restarts: map[string][]verdict.Restart{"w.service": history(10, 1, 150, 2)},
		},
		{
			name:     "up for a stable period now: no loop, whatever the counter",
			samples:  []verdict.Sample{sample(300, cameBack(running("w.service", 7, "b"), 230, 231))},
			restarts: map[string][]verdict.Restart{"w.service": history(200, 5, 215, 6, 231, 7)},
		},
		{
			name:     "an empty history is judged from the samples (journal unavailable)",
			samples:  []verdict.Sample{sample(20, restarting("w.service", 4)), sample(25, restarting("w.service", 6))},
			restarts: map[string][]verdict.Restart{"w.service": {}},
			want:     []verdict.Loop{{Unit: "w.service", Restarts: 6, BudgetS: 600, LoopingS: 25}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := verdict.Classify(verdict.Input{Pass: verdict.PassVerdictOnly, Samples: tc.samples, Activated: at(tc.activated),
				LoopGrace: 600 * time.Second, SettleWindow: 30 * time.Second, Restarts: tc.restarts})
			want := tc.want
			if want == nil {
				want = []verdict.Loop{}
			}
			if diff := cmp.Diff(want, c.RestartLoops); diff != "" {
				t.Errorf("restart loops (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoopSuspects(t *testing.T) {
	s := sample(100,
		upSince(running("stable.service", 3, "a"), 20), // up 80 s
		upSince(running("young.service", 1, "b"), 90),
		restarting("waiting.service", 0),
		func() verdict.Unit {
			u := restarting("queued.service", 2)
			u.SubState = "auto-restart-queued"
			return u
		}(),
		failed("gaveup.service", 1, 1),
		func() verdict.Unit { u := restarting("fault.service", 4); u.ExecMainStatus = 219; return u }(),
		active("never.service", "c"),
	)
	want := []string{"queued.service", "waiting.service", "young.service"}
	if diff := cmp.Diff(want, verdict.LoopSuspects(s)); diff != "" {
		t.Errorf("LoopSuspects (-want +got):\n%s", diff)
	}
}

func TestParseRestarts(t *testing.T) {
	out := `{"__CURSOR":"s=1","__REALTIME_TIMESTAMP":"1796057932342217","N_RESTARTS":"2","_BOOT_ID":"b"}
{"__CURSOR":"s=0","__REALTIME_TIMESTAMP":"1796057927092066","N_RESTARTS":"1","_BOOT_ID":"b"}
`
	got, err := verdict.ParseRestarts([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []verdict.Restart{{At: 1796057927, Counter: 1}, {At: 1796057932, Counter: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseRestarts (-want +got):\n%s", diff)
	}
	if got, err := verdict.ParseRestarts(nil); err != nil || got == nil || len(got) != 0 {
		t.Errorf("no records: %v, %v; want an empty, non-nil history", got, err)
	}
	if _, err := verdict.ParseRestarts([]byte("-- No entries --\n")); err == nil {
		t.Error("text that is not a record parsed")
	}
	argv := verdict.RestartsArgv("a b;c.service", 0)
	if argv[len(argv)-1] != "UNIT=a b;c.service" || argv[4] != "--lines=1" {
		t.Errorf("argv %q", argv)
	}
}

// issue 11 item 4: owned units still starting are pending, aged by systemd's clock.
func TestClassifyPending(t *testing.T) {
	starting := func(name, sub string, since int64) verdict.Unit {
		return verdict.Unit{Name: name, LoadState: "loaded", ActiveState: "activating", SubState: sub, InactiveExit: at(since)}
	}
	queued := verdict.Job{ID: 4, Unit: "web.service", Type: "start", Stat: "waiting"}
	in := verdict.Input{Pass: verdict.PassDeploy, Owned: map[string]bool{"slow.service": true, "web.service": true, "worker.service": true, "notify.service": true},
		LoopGrace: 600 * time.Second, SettleWindow: 30 * time.Second,
		Samples: []verdict.Sample{
			withJobs(sample(10, verdict.Unit{Name: "web.service", ActiveState: "inactive", SubState: "dead"}), queued),
			withJobs(sample(40,
				starting("slow.service", "start", 2), starting("notify.service", "start", 30),
				starting("foreign.service", "start", 2), restarting("worker.service", 1),
				verdict.Unit{Name: "web.service", ActiveState: "inactive", SubState: "dead"}), queued),
		}}
	want := []verdict.Pending{
		{Unit: "notify.service", State: "activating/start", AgeS: 10},
		{Unit: "slow.service", State: "activating/start", AgeS: 38},
		{Unit: "web.service", State: "queued/waiting", AgeS: 30},
	}
	if diff := cmp.Diff(want, verdict.Classify(in).Pending); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
}

// issue 11 item 2: spawn faults by the stage that failed, and starts that never forked.
func TestClassifySpawnStages(t *testing.T) {
	pre := func(name string, code string, status int) verdict.Unit {
		u := failed(name, 0, 0)
		u.ExecStartPre = []verdict.ExecCommand{{Path: "/bin/true", Code: "exited", Status: 0, Start: 5, Stop: 5}, {Path: "/bin/x", Code: code, Status: status, Start: 5, Stop: 5}}
		return u
	}
	resources := func(name string, ran bool) verdict.Unit {
		u := failed(name, 0, 0)
		u.Result = "resources"
		if ran {
			u.ExecMainPID, u.ExecMainStart = 0, at(3) // a forking service whose PID file never came
		}
		return u
	}
	post := failed("post.service", 1, 0)
	post.ExecStartPost = []verdict.ExecCommand{{Path: "/bin/true", Code: "exited", Status: 226, Start: 5, Stop: 5}}
	in := verdict.Input{Pass: verdict.PassDeploy, Owned: map[string]bool{"a.service": true, "b.service": true, "c.service": true, "d.service": true, "post.service": true},
		LoopGrace: 600 * time.Second, SettleWindow: 30 * time.Second,
		Samples: []verdict.Sample{sample(10, pre("a.service", "exited", 214), pre("b.service", "exited", 1),
			resources("c.service", false), resources("d.service", true), post)}}
	c := verdict.Classify(in)
	wantFaults := []verdict.SpawnFault{
		{Unit: "a.service", Stage: "ExecStartPre", Status: "214/SETSCHEDULER"},
		{Unit: "c.service", Stage: "", Status: "resources"},
		{Unit: "post.service", Stage: "ExecStartPost", Status: "226/NAMESPACE"},
	}
	if diff := cmp.Diff(wantFaults, c.SpawnFaults); diff != "" {
		t.Errorf("spawn faults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b.service", "d.service"}, c.Failed); diff != "" {
		t.Errorf("failed (-want +got):\n%s", diff)
	}
}
