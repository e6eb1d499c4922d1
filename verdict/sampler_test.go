package verdict_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/verdict"
)

// listed is a unit of the cheap view only.
func listed(name, active, sub, inv string) verdict.Unit {
	return verdict.Unit{Listed: true, Name: name, LoadState: "loaded", ActiveState: active, SubState: sub, ExportedInvocation: inv}
}

// full is a unit read in full, also listed.
func full(u verdict.Unit, nRestarts int, inv string) verdict.Unit {
	u.Full, u.NRestarts, u.InvocationID = true, nRestarts, inv
	return u
}

// fullArgs are the units Args names to read in full (the arguments before the
// previous sample's cheap view).
func fullArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "=") {
			out = append(out, a)
		}
	}
	return out
}

// TestSamplerArgs: which units a sample reads in full, whatever the node adds
// (unsteady, with a job, changed: ReadScript's side, TestSamplerLiveNode).
func TestSamplerArgs(t *testing.T) {
	p := &verdict.Sampler{Full: map[string]bool{"web.service": true, "getty@.service": true, "new.service": true}}
	// The first sample: Full (the node picks a template's instances) and the units that
	// trigger others, whatever it lists; no previous cheap view to compare with.
	if diff := cmp.Diff([]string{verdict.TriggerUnits, "getty@.service", "new.service", "web.service"}, p.Args()); diff != "" {
		t.Fatalf("first sample's Args (-want +got):\n%s", diff)
	}
	// A first sample whose units were not read: the next is a first sample again.
	p.Observe(verdict.Sample{At: t0})
	if got := p.Args(); !slices.Contains(got, verdict.TriggerUnits) {
		t.Fatalf("after an unread first sample: Args = %q, want a first sample's", got)
	}
	s := sample(100,
		full(listed("web.service", "active", "running", "aa"), 0, "aa"),        // owned
		full(listed("flappy.service", "active", "running", "bb"), 2, "bb"),     // restarted: watched from now on
		full(listed("tick.service", "inactive", "dead", ""), 0, "cc"),          // has run, now inactive: can run unseen
		full(listed("ssh.service", "active", "running", "dd"), 0, "dd"),        // steady, never restarted
		full(listed("basic.target", "active", "active", ""), 0, "ee"),          // active without an exported invocation
		full(listed("getty@tty1.service", "active", "running", "ff"), 0, "ff"), // an instance of an owned template
		full(listed("never.service", "inactive", "dead", ""), 0, ""),           // never ran
		func() verdict.Unit { // never ran, but a timer starts it
			u := full(listed("backup.service", "inactive", "dead", ""), 0, "")
			u.TriggeredBy = []string{"backup.timer"}
			return u
		}(),
		func() verdict.Unit { // a trigger read in full: the unit it starts is known from now on
			u := full(listed("logrotate.timer", "active", "waiting", ""), 0, "gg")
			u.Triggers = []string{"logrotate.service"}
			return u
		}(),
		listed("logrotate.service", "inactive", "dead", ""), // only listed
	)
	p.Observe(s)
	got := p.Args()
	want := []string{"backup.service", "flappy.service", "getty@.service", "logrotate.service", "new.service", "tick.service", "web.service"}
	if diff := cmp.Diff(want, fullArgs(got)); diff != "" {
		t.Errorf("read in full (-want +got):\n%s", diff)
	}
	wantPrev := []string{"=backup.service inactive -", "=basic.target active -", "=flappy.service active bb", "=getty@tty1.service active ff",
		"=logrotate.service inactive -", "=logrotate.timer active -", "=never.service inactive -", "=ssh.service active dd", "=tick.service inactive -", "=web.service active aa"}
	if diff := cmp.Diff(wantPrev, got[len(want):]); diff != "" {
		t.Errorf("previous cheap view (-want +got):\n%s", diff)
	}

	// A later sample reads flappy.service cheaply (steady, unchanged): it stays under
	// watch; ssh.service restarted automatically once: watched too.
	p.Observe(sample(105,
		listed("web.service", "active", "running", "aa"), listed("flappy.service", "active", "running", "bb"),
		full(listed("ssh.service", "active", "running", "d2"), 1, "d2"), listed("tick.service", "inactive", "dead", ""),
	))
	if diff := cmp.Diff([]string{"flappy.service", "ssh.service"}, p.Watched()); diff != "" {
		t.Errorf("watched (-want +got):\n%s", diff)
	}
	if got := fullArgs(p.Args()); !slices.Contains(got, "flappy.service") || !slices.Contains(got, "ssh.service") {
		t.Errorf("read in full %q, want the watched units", got)
	}

	// A sample whose units were not read, after one that was: the next reads every
	// unit in full, since what changed meanwhile is not known.
	p.Observe(verdict.Sample{At: t0})
	if got := p.Args(); !slices.Equal(got, []string{verdict.AllUnits}) {
		t.Errorf("after an unread sample: Args = %q, want every unit in full", got)
	}
}

// TestChangedCheapView: a unit's change between two samples is judged by what both
// read of it; a unit read in full in one and only listed in the other is never
// compared by InvocationID (systemd removes the export of an inactive unit).
func TestChangedCheapView(t *testing.T) {
	cases := []struct {
		name string
		a, b verdict.Unit
		want bool
	}{
		{"same", listed("a", "active", "running", "x"), listed("a", "active", "running", "x"), false},
		{"state", listed("a", "active", "running", "x"), listed("a", "failed", "failed", ""), true},
		{"exported invocation", listed("a", "active", "running", "x"), listed("a", "active", "running", "y"), true},
		{"inactive, full then listed", full(listed("a", "inactive", "dead", ""), 0, "x"), listed("a", "inactive", "dead", ""), false},
		{"inactive, ran between two full reads", full(listed("a", "inactive", "dead", ""), 0, "x"), full(listed("a", "inactive", "dead", ""), 0, "y"), true},
		{"v1 samples (full, not listed)", verdict.Unit{Full: true, ActiveState: "active", InvocationID: "x"}, verdict.Unit{Full: true, ActiveState: "active", InvocationID: "y"}, true},
	}
	for _, c := range cases {
		if got := verdict.Changed(c.a, c.b); got != c.want {
			t.Errorf("%s: Changed = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSamplerLiveNode samples a real node as a body does: the first sample and a
// quiet one next read in full none but the units they must; a unit that
// changed is read in full in the sample that sees the change (by the node, in the
// same round trip); an unowned unit restarting automatically is read in full and
// stays under watch; a timer's oneshot that ran between two samples is seen, also
// when the timer was there before the first sample, which reads only the few units
// it must in full.
func TestSamplerLiveNode(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := &verdict.Sampler{Full: map[string]bool{"ssh.service": true}}
	read := func() verdict.Sample {
		t.Helper()
		s, err := p.Read(ctx, incusExec(node))
		if err != nil || s.Units == nil {
			t.Fatalf("Read: %v (unread %q)", err, s.Unread)
		}
		return s
	}
	fullOnes := func(s verdict.Sample) []string {
		var out []string
		for name, u := range s.Units {
			if u.Full {
				out = append(out, name)
			}
		}
		slices.Sort(out)
		return out
	}
	// A timer's oneshot there before the first sample: only its timer is read in full
	// then, and its Triggers tell the sampler to read tick.service in full from the
	// next sample on (the node lists an inactive oneshot that ran as unchanged).
	node.MustExec(t, "systemd-run", "--unit=tick", "--on-unit-active=2s", "--on-active=1s", "true")
	s := read()
	if all := len(s.Units); all < 100 || len(fullOnes(s)) > all/3 {
		t.Errorf("first sample: %d of %d units in full, want a few", len(fullOnes(s)), all)
	}
	for name, u := range s.Units {
		trigger := strings.HasSuffix(name, ".timer") || strings.HasSuffix(name, ".socket") || strings.HasSuffix(name, ".path") || strings.HasSuffix(name, ".automount")
		if (trigger || name == "ssh.service") && !u.Full {
			t.Errorf("first sample: %s not read in full", name)
		}
	}
	if u := s.Units["tick.timer"]; !slices.Equal(u.Triggers, []string{"tick.service"}) {
		t.Errorf("tick.timer = %+v: want Triggers tick.service", u)
	}
	t.Logf("first sample: %d of %d units read in full", len(fullOnes(s)), len(s.Units))
	s = read()
	// The others: the inactive units that ran or have a trigger (about 20 of 160 on the
	// test-bed image), and the unsteady dev-vda.device.
	if got := fullOnes(s); len(got) > len(s.Units)/4 || !slices.Contains(got, "ssh.service") {
		t.Errorf("quiet sample read %d of %d units in full %q: want ssh.service and few others", len(got), len(s.Units), got)
	}
	t.Logf("quiet sample: %d of %d units read in full", len(fullOnes(s)), len(s.Units))
	for name, u := range s.Units {
		if !u.Listed {
			t.Errorf("%s not in the cheap view", name)
		}
	}

	node.MustExec(t, "systemctl", "restart", "systemd-logind.service")
	s = read()
	if u := s.Units["systemd-logind.service"]; !u.Full || u.InvocationID == "" || u.InvocationID != u.ExportedInvocation {
		t.Errorf("restarted unit = %+v: want read in full in the sample that sees the change", u)
	}
	s = read()
	if u := s.Units["systemd-logind.service"]; u.Full {
		t.Errorf("unchanged again, systemd-logind.service is still read in full")
	}

	node.MustExec(t, "systemd-run", "--unit=flap", "--property=Restart=always", "--property=RestartSec=1",
		"--property=SyslogIdentifier=flap", "sh", "-c", "sleep 2; exit 1")
	deadline := time.Now().Add(time.Minute)
	for !slices.Contains(p.Watched(), "flap.service") && time.Now().Before(deadline) {
		time.Sleep(time.Second)
		read()
	}
	if !slices.Contains(p.Watched(), "flap.service") {
		t.Fatalf("flap.service restarting was never put under watch")
	}
	var samples []verdict.Sample
	for range 4 {
		time.Sleep(3 * time.Second)
		s = read()
		samples = append(samples, s)
		if u := s.Units["flap.service"]; !u.Full {
			t.Errorf("watched flap.service not read in full: %+v", u)
		}
	}
	c := verdict.Classify(verdict.Input{Samples: samples, LoopGrace: time.Minute, SettleWindow: time.Minute})
	if !slices.Contains(c.Cycling, "tick.service") {
		t.Errorf("cycling %q: want tick.service (a timer's oneshot running between samples)", c.Cycling)
	}
	if !slices.ContainsFunc(c.RestartLoops, func(l verdict.Loop) bool { return l.Unit == "flap.service" }) {
		t.Errorf("restart loops %+v: want flap.service", c.RestartLoops)
	}
}

// TestLoopStableWhileOnlyListed: without a restart history, a loop counts from the
// last sample that saw the unit up for a stable period; a sample that only listed the
// unit tells it by the invocation a later full read names.
func TestLoopStableWhileOnlyListed(t *testing.T) {
	cheap := listed("web.service", "active", "running", "x")
	crashed := full(listed("web.service", "activating", "auto-restart", ""), 3, "x")
	crashed.ActiveEnter, crashed.ActiveExit = t0.Unix()+20, t0.Unix()+105
	in := verdict.Input{
		Samples:   []verdict.Sample{sample(100, cheap), sample(110, crashed)},
		Activated: t0.Unix() + 10, LoopGrace: 30 * time.Second,
	}
	c := verdict.Classify(in)
	want := []verdict.Loop{{Unit: "web.service", Restarts: 3, BudgetS: 30, LoopingS: 10}}
	if diff := cmp.Diff(want, c.RestartLoops); diff != "" {
		t.Errorf("loops (-want +got):\n%s", diff)
	}
}
