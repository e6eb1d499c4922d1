package effects_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/verdict"
)

func lockedDeploy(f effects.Transport, top string, cfg effects.Config) (*effects.Deploy, *effectstest.Events) {
	ev := &effectstest.Events{}
	return (&effects.Deploy{Node: "web1", Transport: f, Config: cfg, Reporter: ev, Source: effects.Source{Toplevel: top}}).
		WithSeams(func(context.Context, effects.Source) (string, error) { return top, nil }, time.Millisecond), ev
}

// A deploy takes the node's lock before the copy, bumps the generation, and
// releases it in conclude.
func TestLockTakenAndReleased(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.LockGeneration = 4
	d, _ := lockedDeploy(f, f.Toplevel, testConfig(false))
	res := d.Run(context.Background())
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %q", res.ExitCode, res.Verdict.Reasons)
	}
	if f.Lock != "" || f.LockGeneration != 5 {
		t.Errorf("after the run: lock %q generation %d, want none and 5", f.Lock, f.LockGeneration)
	}
	log := strings.Join(f.Log(), "\n")
	if strings.Index(log, "lock take") > strings.Index(log, "copy ") || !strings.Contains(log, "lock release") {
		t.Errorf("lock not taken before the copy and released:\n%s", log)
	}
}

// The verdict-only pass changes nothing and takes no lock.
func TestVerdictOnlyTakesNoLock(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.Lock = fmt.Sprintf("3 %d ci-2 10 %d", time.Now().Unix()+600, time.Now().Unix())
	d, _ := lockedDeploy(f, f.Toplevel, testConfig(true))
	d.Run(context.Background())
	if f.Did("lock ") != 0 {
		t.Errorf("verdict-only pass touched the lock: %v", f.Log())
	}
}

// A node locked by another deployer: refused with exit 2 naming the holder, after
// DEPLOY_LOCK_WAIT, with nothing copied, switched or finalized.
func TestLockHeldRefuses(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	since := time.Now().Unix()
	f.Lock = fmt.Sprintf("3 %d ci-2 4242 %d", since+600, since)
	cfg := testConfig(false)
	cfg.LockWait = 1500 * time.Millisecond
	d, _ := lockedDeploy(f, f.Toplevel, cfg)
	start := time.Now()
	res := d.Run(context.Background())
	waited := time.Since(start)
	why := strings.Join(res.Verdict.Reasons, ";")
	if res.ExitCode != exitcode.Refused || !strings.Contains(why, "host ci-2, pid 4242, since "+time.Unix(since, 0).UTC().Format(time.RFC3339)) {
		t.Errorf("exit %d reasons %q", res.ExitCode, why)
	}
	if waited < cfg.LockWait {
		t.Errorf("refused after %s, before DEPLOY_LOCK_WAIT %s", waited, cfg.LockWait)
	}
	if f.Did("copy ") != 0 || f.Did("run systemd-run") != 0 || f.Did("finalize ") != 0 || f.Did("lock take") != 0 {
		t.Errorf("a refused deploy acted: %v", f.Log())
	}
	if !strings.HasPrefix(f.Lock, "3 ") {
		t.Errorf("the holder's lock was touched: %q", f.Lock)
	}
}

// A lease that ran out is broken, unless its switch unit still runs.
func TestExpiredLockBroken(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.LockGeneration = 3
	f.Lock = fmt.Sprintf("3 %d killed-host 77 %d", time.Now().Unix()-1, time.Now().Unix()-100)
	d, ev := lockedDeploy(f, f.Toplevel, testConfig(false))
	res := d.Run(context.Background())
	if res.ExitCode != 0 || f.Lock != "" || f.LockGeneration != 4 {
		t.Fatalf("exit %d lock %q generation %d: %q", res.ExitCode, f.Lock, f.LockGeneration, res.Verdict.Reasons)
	}
	if !strings.Contains(strings.Join(ev.Logs(), "\n"), "deploy lock: broke the lock of deployer host killed-host, pid 77") {
		t.Errorf("breaking not logged: %q", ev.Logs())
	}
}

// A lock whose holder was a process of this machine that is gone (a killed
// deployer) is broken at once, without waiting for its lease.
func TestLockOfGoneProcessBroken(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Skip(err)
	}
	host, _ := os.Hostname()
	f := effectstest.Load(t, "healthy")
	f.LockGeneration = 3
	f.Lock = fmt.Sprintf("3 %d %s %d %d %s", time.Now().Unix()+600, host, dead.Process.Pid, time.Now().Unix(), effects.LockWhere())
	d, ev := lockedDeploy(f, f.Toplevel, testConfig(false))
	start := time.Now()
	res := d.Run(context.Background())
	if res.ExitCode != 0 || f.Lock != "" || f.LockGeneration != 4 {
		t.Fatalf("exit %d lock %q generation %d: %q", res.ExitCode, f.Lock, f.LockGeneration, res.Verdict.Reasons)
	}
	if !strings.Contains(strings.Join(ev.Logs(), "\n"), fmt.Sprintf("pid %d, since", dead.Process.Pid)) || time.Since(start) > 30*time.Second {
		t.Errorf("breaking not logged, or waited: %q", ev.Logs())
	}
	// The same lock of a live process of this machine is held.
	f.Lock = fmt.Sprintf("3 %d %s %d %d %s", time.Now().Unix()+600, host, os.Getppid(), time.Now().Unix(), effects.LockWhere())
	d, _ = lockedDeploy(f, f.Toplevel, testConfig(false))
	if res := d.Run(context.Background()); res.ExitCode != exitcode.Refused {
		t.Errorf("a live holder's lock: exit %d, want %d: %q", res.ExitCode, exitcode.Refused, res.Verdict.Reasons)
	}
}

// thief takes the node's lock over once the body took its snapshot: the deployer
// that lost it must not start the switch.
type thief struct {
	*effectstest.Node
	stolen bool
}

func (th *thief) Run(ctx context.Context, c effects.Command) (int, error) {
	if len(c.Argv) >= 3 && c.Argv[2] == verdict.ReadScript && !th.stolen {
		th.stolen = true
		th.Lock = fmt.Sprintf("99 %d other 5 %d", time.Now().Unix()+600, time.Now().Unix())
	}
	return th.Node.Run(ctx, c)
}

func TestLostLockFencesTheSwitch(t *testing.T) {
	th := &thief{Node: effectstest.Load(t, "healthy")}
	d, _ := lockedDeploy(th, th.Toplevel, testConfig(false))
	res := d.Run(context.Background())
	why := strings.Join(res.Verdict.Reasons, ";")
	if res.ExitCode != exitcode.Infra || !strings.Contains(why, effects.ErrLockLost.Error()) || !strings.Contains(why, "token 99") {
		t.Errorf("exit %d reasons %q", res.ExitCode, why)
	}
	if th.Did("run systemd-run") != 0 || th.Did("fenced systemd-run") != 1 || th.Did("finalize ") != 0 {
		t.Errorf("a deployer without the lock acted: %v", th.Log())
	}
	if !strings.HasPrefix(th.Lock, "99 ") {
		t.Errorf("the new holder's lock was released: %q", th.Lock)
	}
}

// finalize and revert are fenced too: the transport gets the token in ctx.
func TestLostLockFencesFinalize(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	ctx := effects.WithFence(context.Background(), 1, time.Minute)
	err := f.FinalizeBootloader(ctx, f.Toplevel)
	if err == nil || !strings.Contains(err.Error(), effects.LockLostMarker) || f.Did("finalize ") != 0 {
		t.Errorf("finalize without the lock: %v %v", err, f.Log())
	}
	if err := f.RevertBootloader(ctx); err == nil || f.Did("revert") != 0 {
		t.Errorf("revert without the lock: %v", err)
	}
}

// slowSnapshot answers for a Node, but its snapshot read takes a while.
type slowSnapshot struct {
	*effectstest.Node
	delay time.Duration
	once  bool
}

func (s *slowSnapshot) Run(ctx context.Context, c effects.Command) (int, error) {
	if len(c.Argv) >= 3 && c.Argv[2] == verdict.ReadScript && !s.once {
		s.once = true
		time.Sleep(s.delay)
	}
	return s.Node.Run(ctx, c)
}

// The holder renews its lease while it works: a run longer than DEPLOY_LOCK_TTL
// keeps its lock, and its switch and finalize are not fenced out.
func TestLockRenewedWhileWorking(t *testing.T) {
	s := &slowSnapshot{Node: effectstest.Load(t, "healthy"), delay: 2500 * time.Millisecond}
	cfg := testConfig(false)
	cfg.LockTTL = time.Second
	d, _ := lockedDeploy(s, s.Toplevel, cfg)
	res := d.Run(context.Background())
	if res.ExitCode != 0 || s.Did("lock renew") < 2 || s.Did("run systemd-run") != 1 || s.Did("finalize ") != 1 {
		t.Errorf("exit %d reasons %q; log %v", res.ExitCode, res.Verdict.Reasons, s.Log())
	}
	if s.Lock != "" {
		t.Errorf("lock left: %q", s.Lock)
	}
}

// slowAroundSwitch answers for a Node, but its first sample before the switch starts
// and its first sample after it each take a while.
type slowAroundSwitch struct {
	*effectstest.Node
	before, after time.Duration
	slept         [2]bool // only the body samples: the renewer never reads them
}

func (s *slowAroundSwitch) Run(ctx context.Context, c effects.Command) (int, error) {
	if len(c.Argv) >= 3 && c.Argv[2] == verdict.ReadScript {
		i := min(s.Did("run systemd-run"), 1)
		if !s.slept[i] {
			s.slept[i] = true
			time.Sleep([]time.Duration{s.before, s.after}[i])
		}
	}
	return s.Node.Run(ctx, c)
}

// A fenced step renews the lease as it passes (LockScript's fence with a TTL), and
// the renewer counts its period from there. With DEPLOY_LOCK_TTL 6 s (a renew every
// 2 s after the lease was written), a switch started 1.5 s after the take and a run
// that ends 1.5 s after that renews nothing: counted from the take alone, it renewed
// at 2 s. On a fleet the takes fall together, and so did the renewals.
func TestFencedStepRenewsLease(t *testing.T) {
	s := &slowAroundSwitch{Node: effectstest.Load(t, "healthy"), before: 1500 * time.Millisecond, after: 1500 * time.Millisecond}
	cfg := testConfig(false)
	cfg.LockTTL = 6 * time.Second
	d, _ := lockedDeploy(s, s.Toplevel, cfg)
	res := d.Run(context.Background())
	if res.ExitCode != 0 || s.Did("run systemd-run") != 1 || s.Did("finalize ") != 1 {
		t.Fatalf("exit %d reasons %q; log %v", res.ExitCode, res.Verdict.Reasons, s.Log())
	}
	// The switch's start and finalize each renewed the lease: 6 s plus the second
	// LockScript adds (leaseSeconds).
	if n := s.Did("lock lease 7 (fence)"); n != 2 {
		t.Errorf("%d fenced steps renewed the lease, want 2 (the switch, finalize): %v", n, s.Log())
	}
	if n := s.Did("lock renew"); n != 0 {
		t.Errorf("%d renews in a run whose fenced switch had renewed the lease a period before it ended: %v", n, s.Log())
	}
	if s.Lock != "" {
		t.Errorf("lock left: %q", s.Lock)
	}
}

// failingFinalize answers for a Node, but cannot install the boot entry.
type failingFinalize struct{ *effectstest.Node }

func (f failingFinalize) FinalizeBootloader(context.Context, string) error {
	return errors.New("install the boot entry: no init in the toplevel")
}

// A finalize that fails after the report raises the exit code to 3, and the result
// says why (Late), for a caller whose operator sees no log events (issue 31 item 10).
func TestFinalizeFailureIsLate(t *testing.T) {
	f := failingFinalize{effectstest.Load(t, "healthy")}
	d, _ := lockedDeploy(f, f.Toplevel, testConfig(false))
	res := d.Run(context.Background())
	if res.ExitCode != 3 || !res.Verdict.OK || len(res.Late) != 1 ||
		res.Late[0] != "finalize: setting the system profile and boot entry: install the boot entry: no init in the toplevel" {
		t.Errorf("exit %d, verdict ok %v, late %q; log %v", res.ExitCode, res.Verdict.OK, res.Late, f.Log())
	}
}
