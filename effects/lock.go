package effects

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/localcmd"
)

// The body's side of the lock (lock_body_test.go): the take, the lease renewed while
// the body works, its fenced steps and the release. The script is lockscript.go's,
// the decision lockdecide.go's.

// heldLock is a lock this body holds, renewed in the background.
type heldLock struct {
	token uint64
	stop  context.CancelFunc
	done  chan struct{}

	mu   sync.Mutex
	lost string // why the lock was lost, once a renew found another lock
	// leased is when the newest lease write that succeeded began (this deployer's
	// clock): the take, or a fenced step, which renews the lease as it passes.
	leased time.Time
}

// renewedAt records that a lease write begun at t succeeded.
func (l *heldLock) renewedAt(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.After(l.leased) {
		l.leased = t
	}
}

func (l *heldLock) leasedAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leased
}

func (l *heldLock) lostReason() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// lockIdentity is this deployer on the lock line: its host (made one field), pid,
// and process space: the kernel's boot id and the pid namespace, so that only a
// deployer that can see the holder's pid judges whether it lives.
// lockCommand runs one LockScript verb on the node.
func (r *run) lockCommand(ctx context.Context, args ...string) (stdout, stderr string, code int, err error) {
	argv := append([]string{"sh", "-c", LockScript, "sh"}, args...)
	var out, errOut strings.Builder
	// The running system's tools (flock, date): the new toplevel may not be copied
	// yet, and r.toplevel is the body's (the renewal runs beside it).
	code, err = r.d.Transport.Run(ctx, Command{Argv: argv, Stdout: &out, Stderr: &errOut, Path: []string{"/run/current-system/sw/bin"}})
	return out.String(), errOut.String(), code, err
}

func (r *run) readLock(ctx context.Context) (lockState, error) {
	out, errOut, code, err := r.lockCommand(ctx, "read")
	if err != nil {
		return lockState{}, err
	}
	if code != 0 {
		return lockState{}, fmt.Errorf("reading the lock exited %d: %s", code, localcmd.LastLine(errOut))
	}
	return parseLockState(out)
}

// acquireOrRead takes the lock in one command when there is none and no switch
// unit runs (taken is its holder), and otherwise reads it.
func (r *run) acquireOrRead(ctx context.Context, me deployer, ttl string) (st lockState, taken *lockHolder, err error) {
	out, errOut, code, err := r.lockCommand(ctx, "acquire", me.Host, strconv.Itoa(me.PID), ttl, me.Where)
	if err != nil {
		return lockState{}, nil, err
	}
	if code != 0 {
		return lockState{}, nil, fmt.Errorf("reading the lock exited %d: %s", code, localcmd.LastLine(errOut))
	}
	if line, ok := strings.CutPrefix(strings.TrimSpace(out), "taken "); ok {
		h, err := parseHolder(line)
		if err == nil && h == nil {
			err = errors.New("an empty lock line")
		}
		if err != nil {
			return lockState{}, nil, fmt.Errorf("taking it: %w", err)
		}
		return lockState{}, h, nil
	}
	st, err = parseLockState(out)
	return st, nil, err
}

// lockPoll is the pause between two reads of a lock held by another deployer.
const lockPoll = time.Second

// acquireLock takes the node's deploy lock before anything changes the node (at the
// start of push), waiting up to DEPLOY_LOCK_WAIT for another deployer's lock; then
// it refuses the node (exit 2) naming the holder.
func (r *run) acquireLock(ctx context.Context) error {
	me := lockIdentity()
	start := time.Now()
	deadline := start.Add(r.cfg.LockWait)
	// A switch left running by a deployer that is gone ends by its own bound
	// (TimeoutStartSec=DEPLOY_SWITCH_TIMEOUT): wait for it that long whatever
	// DEPLOY_LOCK_WAIT says, so a rerun after a killed deployer goes on.
	switchDeadline := start.Add(max(r.cfg.LockWait, r.cfg.SwitchTimeout+switchStopGrace))
	ttl := leaseSeconds(r.cfg.LockTTL)
	logged := false
	for {
		asked := time.Now() // the lease a take writes runs from after this
		st, taken, err := r.acquireOrRead(ctx, me, ttl)
		if err != nil {
			if errors.Is(err, ErrRefused) {
				return stopWith(exitcode.Refused, "deploy lock: %w", err)
			}
			return stopWith(exitcode.Infra, "deploy lock: %w", err)
		}
		if taken != nil {
			r.lockTaken(ctx, taken, asked)
			return nil
		}
		why, until := "", deadline
		st.HolderGone = journalHolderGone(r.lastRun, st.Holder, me, processAlive)
		switch decision := decideLock(st, me, processAlive); decision {
		case lockFree, lockExpired, lockAbandoned:
			asked = time.Now()
			out, errOut, code, err := r.lockCommand(ctx, "take", st.Line, me.Host, strconv.Itoa(me.PID), ttl, me.Where)
			if err != nil {
				return stopWith(exitcode.Infra, "deploy lock: taking it: %w", err)
			}
			if code == LockFenced {
				continue // another deployer changed it since the read: read again
			}
			if code != 0 {
				return stopWith(exitcode.Infra, "deploy lock: taking it exited %d: %s", code, localcmd.LastLine(errOut))
			}
			h, err := parseHolder(out)
			if err != nil || h == nil {
				return stopWith(exitcode.Infra, "deploy lock: taking it: %v", err)
			}
			switch decision {
			case lockExpired:
				r.log("warn", "%s: deploy lock: broke the lock of %s: its lease ran out and no switch of it runs", r.d.Node, st.Holder)
			case lockAbandoned:
				r.log("warn", "%s: deploy lock: broke the lock of %s: that process is gone and no switch of it runs", r.d.Node, st.Holder)
			}
			r.lockTaken(ctx, h, asked)
			return nil
		case lockSwitching:
			why, until = fmt.Sprintf("the switch unit %s of a deployer that is gone still runs on the node", strings.Join(st.Running, ", ")), switchDeadline
			if st.Holder != nil {
				why += " (its lock: " + st.Holder.String() + ")"
			}
			if !logged {
				logged = true
				r.log("info", "%s: deploy lock: waiting for %s to end", r.d.Node, why)
			}
		case lockMine:
			why = "this deployer already holds it for another node entry: " + st.Holder.String()
		case lockHeld:
			why = "held by " + st.Holder.String()
		}
		if !time.Now().Before(until) {
			return stopWith(exitcode.Refused, "deploy lock: %s; refused after waiting %s (DEPLOY_LOCK_WAIT); nothing on the node changed",
				why, time.Since(start).Round(time.Second))
		}
		if err := sleep(ctx, min(lockPoll, time.Until(until)+time.Millisecond)); err != nil {
			return stopWith(exitcode.Infra, "deploy lock: %w", err)
		}
	}
}

// lockTaken starts holding the lock h this body just took with a command begun at asked.
func (r *run) lockTaken(ctx context.Context, h *lockHolder, asked time.Time) {
	// No "push:" here: a push's own log line stays the one about the copy.
	r.log("info", "%s: deploy lock: taken (token %d)", r.d.Node, h.Token)
	r.startRenew(ctx, h.Token, asked)
	testPauseAfterLock(ctx)
}

// testPauseAfterLock sleeps SWITCHYARD_TEST_PAUSE_AFTER_LOCK seconds after the lock
// is taken: a test-only seam so the fencing test can stop the deployer (SIGSTOP)
// holding the lock before anything changed. Unset in production.
func testPauseAfterLock(ctx context.Context) { testPause(ctx, "SWITCHYARD_TEST_PAUSE_AFTER_LOCK") }

// testPause sleeps the seconds the test-only variable name holds (unset in
// production): the seams where the tests stop or kill the deployer.
func testPause(ctx context.Context, name string) {
	if s := os.Getenv(name); s != "" {
		if d, err := parseSeconds(s); err == nil {
			_ = sleep(ctx, d)
		}
	}
}

// startRenew keeps the lease alive while the body works: a third of DEPLOY_LOCK_TTL
// after the lease was last written (the take, a renew, or a fenced step that
// succeeded) it renews with the token. A renew that finds another lock means the
// lock is lost: renewing stops and the fenced steps will be refused on the node.
//
// Counting from the fenced steps matters on fleets: every body takes its lock within
// the same second, so without them all renewals fell together a third of the TTL
// later, in the middle of the last samples (16 renews at 42 s of a 44 s run).
func (r *run) startRenew(ctx context.Context, token uint64, takenAt time.Time) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &heldLock{token: token, stop: cancel, done: make(chan struct{}), leased: takenAt}
	r.lock = l
	every := max(r.cfg.LockTTL/3, 200*time.Millisecond)
	ttl := leaseSeconds(r.cfg.LockTTL)
	go func() {
		defer close(l.done)
		next := takenAt.Add(every) // a failed renew is retried a period later
		for {
			due := next
			if leased := l.leasedAt().Add(every); leased.After(due) {
				due = leased
			}
			if wait := time.Until(due); wait > 0 {
				if err := sleep(rctx, wait); err != nil {
					return
				}
				continue // a fenced step may have moved the lease meanwhile
			}
			next = time.Now().Add(every)
			actx, acancel := context.WithTimeout(rctx, max(every, 5*time.Second))
			out, errOut, code, err := r.lockCommand(actx, "renew", strconv.FormatUint(token, 10), ttl)
			acancel()
			switch {
			case rctx.Err() != nil:
				return
			case err != nil:
				r.log("warn", "%s: deploy lock: renewing it: %v (retrying)", r.d.Node, err)
			case code == LockFenced:
				why := describeLine(out)
				l.mu.Lock()
				l.lost = why
				l.mu.Unlock()
				r.log("error", "%s: deploy lock: renewing it: %v: token %d is no longer the node's lock (now %s); every further change is refused on the node",
					r.d.Node, ErrLockLost, token, why)
				return
			case code != 0:
				r.log("warn", "%s: deploy lock: renewing it exited %d: %s (retrying)", r.d.Node, code, localcmd.LastLine(errOut))
			}
		}
	}()
}

func describeLine(line string) string {
	h, err := parseHolder(line)
	if err != nil || h == nil {
		return "none (released or broken)"
	}
	return h.String()
}

// fencedStep runs a step that changes the node: its commands run only while the node
// still knows this body's token as its lock, and each renews the lease. When the step
// succeeds its commands passed the fence, so the renewer's next renewal is due a third
// of DEPLOY_LOCK_TTL after the step began.
func (r *run) fencedStep(ctx context.Context, step func(context.Context) error) error {
	if r.lock == nil {
		return step(ctx)
	}
	start := time.Now()
	err := step(WithFence(ctx, r.lock.token, r.cfg.LockTTL))
	if err == nil {
		r.lock.renewedAt(start)
	}
	return err
}

// lockLost tells, after a fenced step failed, whether it failed because the lock
// is no longer this body's; the error names the lock now on the node.
func (r *run) lockLost(ctx context.Context, stepErr error) error {
	if r.lock == nil {
		return nil
	}
	marked := (stepErr != nil && strings.Contains(stepErr.Error(), LockLostMarker)) || r.lock.lostReason() != ""
	if st, err := r.readLock(ctx); err == nil {
		ours := st.Holder != nil && st.Holder.Token == r.lock.token && st.Now < st.Holder.Expires
		if !ours {
			return fmt.Errorf("%w: token %d is no longer the node's lock (now %s)", ErrLockLost, r.lock.token, describeLine(st.Line))
		}
		if !marked {
			return nil // still ours: the step failed for its own reason
		}
	}
	if !marked {
		return nil
	}
	return fmt.Errorf("%w: token %d is no longer the node's lock", ErrLockLost, r.lock.token)
}

// releaseLock stops renewing and removes the lock if it is still this body's.
// It runs in conclude, on every path, even after the run's context was cancelled.
func (r *run) releaseLock(ctx context.Context) {
	l := r.lock
	if l == nil {
		return
	}
	r.lock = nil
	l.stop()
	<-l.done
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	out, errOut, code, err := r.lockCommand(ctx, "release", strconv.FormatUint(l.token, 10))
	switch {
	case err != nil:
		r.log("warn", "%s: conclude: releasing the deploy lock: %v (its lease ends it)", r.d.Node, err)
	case code == LockFenced:
		r.log("warn", "%s: conclude: the deploy lock (token %d) was no longer this deployer's: left as it is (%s)", r.d.Node, l.token, describeLine(out))
	case code != 0:
		r.log("warn", "%s: conclude: releasing the deploy lock exited %d: %s (its lease ends it)", r.d.Node, code, localcmd.LastLine(errOut))
	}
}
