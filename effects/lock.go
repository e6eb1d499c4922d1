package effects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/switchyard-nix/switchyard/exitcode"
)

// The node-side deploy lock (issue 15): one deployer at a time changes a node,
// whatever method it uses (ssh, tf, ...), because the lock lives on the node.
//
//	/run/switchyard/lock             the holder: "TOKEN EXPIRES HOST PID SINCE WHERE"
//	                                 (tmpfs: a reboot ends every lock)
//	/run/switchyard/lock.flock       flock(1) target serialising every lock command
//	/var/lib/switchyard/lock-generation  the fence counter (persists across reboots)
//
// Every take increments the generation and writes it into the lock: that number is
// the holder's token. Every command that changes the node (the switch's start,
// finalize's and revert's steps) runs through LockScript's fence verb, which checks,
// under the same flock, that the token is still the node's current lock and its
// lease has not run out, and runs the command while holding the flock (so no take
// can come between the check and the act). A deployer paused past its lease and
// overtaken can therefore never act again: its token is no longer current.
//
// Times are the node's clock (date +%s on the node), never the deployer's, so
// deployers with skewed clocks agree on when a lease ends.

// LockScript is the fixed script of every lock command, run as
// `sh -c LockScript sh VERB ARGS...`; every input is an argument.
//
//	read                     print "now N", "generation N", "lock LINE" and one
//	                         "switch UNIT ACTIVE SUB" per switchyard switch unit
//	acquire HOST PID TTL WHERE  take the lock when there is none and no switch unit
//	                         runs (the common case: one command, not read then take)
//	                         and print "taken LINE"; otherwise what read prints
//	take EXPECTED HOST PID TTL WHERE  if the lock line is still EXPECTED (compare and set),
//	                         bump the generation and write a new lock; print it
//	renew TOKEN TTL          extend the lease of the lock holding TOKEN; print it
//	release TOKEN            remove the lock holding TOKEN
//	fence TOKEN TTL ARGV...  run ARGV if TOKEN is the current, unexpired lock, having
//	                         renewed its lease to TTL (0: left as it is); prints nothing
//	                         of its own, ARGV's output is the command's
//
// A verb that finds another lock than the one it was given exits LockFenced and
// prints the lock line it found (fence: on stderr, after LockLostMarker).
//
// Every command that changes the node runs through it, so it starts few processes
// (the shell's read for the one-line files, mkdir only when a directory is missing):
// flock, date, and mv for a write.
const LockScript = `set -eu
dir=/run/switchyard
state=/var/lib/switchyard
umask 077
[ -d "$dir" ] && [ -d "$state" ] || mkdir -p "$dir" "$state"
exec 9>>"$dir/lock.flock"
if ! flock -w 30 9; then
	echo "switchyard lock: $dir/lock.flock stayed busy for 30 s" >&2
	exit 70
fi
now=$(date +%s)
cur=""
if [ -f "$dir/lock" ]; then IFS= read -r cur < "$dir/lock" || :; fi
gen=0
if [ -f "$state/lock-generation" ]; then IFS= read -r gen < "$state/lock-generation" || :; fi
case $gen in
''|*[!0-9]*) echo "switchyard lock: $state/lock-generation holds no number" >&2; exit 70 ;;
esac
tok=${cur%% *}
rest=${cur#* }
exp=${rest%% *}
put() { # LINE [PREFIX]: write the lock, print it (after PREFIX)
	printf '%s\n' "$1" > "$dir/lock.tmp"
	mv -f "$dir/lock.tmp" "$dir/lock"
	printf '%s\n' "${2:+$2 }$1"
}
take_lock() { # HOST PID TTL WHERE [PREFIX]
	gen=$((gen + 1))
	printf '%s\n' "$gen" > "$state/lock-generation.tmp"
	mv -f "$state/lock-generation.tmp" "$state/lock-generation"
	put "$gen $((now + $3)) $1 $2 $now $4" "${5:-}"
}
verb=$1
shift
case $verb in
read | acquire)
	units=$(systemctl list-units --all --plain --no-legend --no-pager 'switchyard-switch-*' | awk '{ print "switch " $1 " " $3 " " $4 }')
	running=
	while read -r _ _ active sub; do
		case $active/$sub in activating/* | deactivating/* | */running | */start) running=1 ;; esac
	done <<EOF
$units
EOF
	if [ "$verb" = acquire ] && [ -z "$cur" ] && [ -z "$running" ]; then
		take_lock "$1" "$2" "$3" "$4" taken
		exit
	fi
	printf 'now %s\ngeneration %s\nlock %s\n' "$now" "$gen" "$cur"
	[ -z "$units" ] || printf '%s\n' "$units"
	;;
take)
	if [ "$cur" != "$1" ]; then printf '%s\n' "$cur"; exit 75; fi
	take_lock "$2" "$3" "$4" "$5"
	;;
renew)
	if [ -z "$cur" ] || [ "$tok" != "$1" ]; then printf '%s\n' "$cur"; exit 75; fi
	rest=${rest#* }
	put "$1 $((now + $2)) $rest"
	;;
release)
	if [ -z "$cur" ] || [ "$tok" != "$1" ]; then printf '%s\n' "$cur"; exit 75; fi
	rm -f "$dir/lock"
	;;
fence)
	if [ -z "$cur" ] || [ "$tok" != "$1" ] || [ "$now" -ge "$exp" ]; then
		echo "switchyard-lock-lost: the deploy lock with token $1 is no longer this deployer's (lock now: ${cur:-none}); $3 not run" >&2
		exit 75
	fi
	[ "$2" = 0 ] || put "$1 $((now + $2)) ${rest#* }" >/dev/null
	shift 2
	"$@" 9>&-
	;;
*)
	echo "switchyard lock: unknown verb $verb" >&2
	exit 70
	;;
esac
`

// leaseSeconds is the lease a take or a renew writes, in the node's whole seconds: the
// TTL, at least 1, plus one. The node's clock counts whole seconds, so a lease written
// late in second s as s+TTL would lapse up to a second early, and with a short TTL
// between two renewals (every third of it): the holder's own fenced step was refused
// one time in a few with DEPLOY_LOCK_TTL=1.
func leaseSeconds(ttl time.Duration) string {
	return strconv.FormatInt(int64(max(ttl.Seconds(), 1))+1, 10)
}

// LockFenced is LockScript's exit status when the lock is not the caller's.
const LockFenced = 75

// LockLostMarker starts the line the fence verb prints on stderr when it refuses.
const LockLostMarker = "switchyard-lock-lost:"

// ErrLockLost marks a step refused on the node because this deployer's lock was
// taken over (it was paused past its lease, or could not renew it).
var ErrLockLost = errors.New("deploy lock lost")

type fenceKey struct{}

// fence is what WithFence puts in a context.
type fence struct {
	token uint64
	lease string // LockScript's fence TTL: leaseSeconds, or "0"
}

// WithFence is ctx carrying the lock token: a transport's Run under it runs every
// command through FenceArgv, so the node refuses it unless token is still its lock.
// A command that passes the fence renews the lease to ttl (0: leaves it as it is), in
// the same command: the holder's own steps keep its lease, and its renewer can wait.
func WithFence(ctx context.Context, token uint64, ttl time.Duration) context.Context {
	f := fence{token: token, lease: "0"}
	if ttl > 0 {
		f.lease = leaseSeconds(ttl)
	}
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceToken is the token WithFence put in ctx.
func FenceToken(ctx context.Context) (uint64, bool) {
	f, ok := ctx.Value(fenceKey{}).(fence)
	return f.token, ok
}

// FenceArgv is argv as a transport must run it under ctx: unchanged, or, when ctx
// carries a fence (WithFence), wrapped in LockScript's fence verb. Every
// transport's Run calls it first, so the bootloader hooks' own commands are fenced
// too.
func FenceArgv(ctx context.Context, argv []string) []string {
	f, ok := ctx.Value(fenceKey{}).(fence)
	if !ok || len(argv) == 0 {
		return argv
	}
	return append([]string{"sh", "-c", LockScript, "sh", "fence", strconv.FormatUint(f.token, 10), f.lease}, argv...)
}

// lockHolder is one lock line.
type lockHolder struct {
	Token   uint64
	Expires int64 // node's clock, Unix seconds
	Host    string
	PID     int
	Since   int64 // when the holder took it, node's clock
	// Where tells in which process space PID is meaningful: the deployer's kernel
	// boot and pid namespace ("-" when unknown). A deployer with the same Where can
	// ask whether the holder's process still lives.
	Where string
}

func (h lockHolder) String() string {
	return fmt.Sprintf("deployer host %s, pid %d, since %s (token %d, lease until %s)", h.Host, h.PID,
		time.Unix(h.Since, 0).UTC().Format(time.RFC3339), h.Token, time.Unix(h.Expires, 0).UTC().Format(time.RFC3339))
}

// parseHolder reads a lock line; "" is no lock.
func parseHolder(line string) (*lockHolder, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, nil
	}
	f := strings.Fields(line)
	if len(f) != 5 && len(f) != 6 {
		return nil, fmt.Errorf("lock line %q: want 6 fields", line)
	}
	h := lockHolder{Where: "-"}
	if len(f) == 6 {
		h.Where = f[5]
	}
	var err error
	if h.Token, err = strconv.ParseUint(f[0], 10, 64); err != nil {
		return nil, fmt.Errorf("lock line %q: token: %w", line, err)
	}
	if h.Expires, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return nil, fmt.Errorf("lock line %q: expiry: %w", line, err)
	}
	h.Host = f[2]
	if h.PID, err = strconv.Atoi(f[3]); err != nil {
		return nil, fmt.Errorf("lock line %q: pid: %w", line, err)
	}
	if h.Since, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return nil, fmt.Errorf("lock line %q: start: %w", line, err)
	}
	return &h, nil
}

// lockState is what LockScript's read verb saw.
type lockState struct {
	Now        int64
	Generation uint64
	Line       string // the lock line as it is (take's EXPECTED)
	Holder     *lockHolder
	Running    []string // switchyard switch units still running (activating or deactivating)
	// HolderGone: this deployer's journal names the holder's token, and the deployer
	// that wrote it is gone (journalHolderGone).
	HolderGone bool
}

func parseLockState(out string) (lockState, error) {
	var st lockState
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		key, val, _ := strings.Cut(line, " ")
		seen[key] = true
		var err error
		switch key {
		case "now":
			st.Now, err = strconv.ParseInt(val, 10, 64)
		case "generation":
			st.Generation, err = strconv.ParseUint(val, 10, 64)
		case "lock":
			st.Line = strings.TrimSpace(val)
			st.Holder, err = parseHolder(val)
		case "switch":
			f := strings.Fields(val)
			if len(f) == 3 && (f[1] == "activating" || f[1] == "deactivating" || f[2] == "running" || f[2] == "start") {
				st.Running = append(st.Running, f[0])
			}
		}
		if err != nil {
			return lockState{}, fmt.Errorf("reading the lock: %q: %w", line, err)
		}
	}
	if !seen["now"] || !seen["lock"] {
		return lockState{}, fmt.Errorf("reading the lock: incomplete answer %q", strings.TrimSpace(out))
	}
	return st, nil
}

// lockDecision is what a deployer does about the lock it read.
type lockDecision int

const (
	lockFree      lockDecision = iota // no lock: take it
	lockExpired                       // a lease ran out and no switch runs: break it and take it
	lockAbandoned                     // its holder's process is gone (same machine) and no switch runs: break it
	lockHeld                          // another live deployer's lease: wait or refuse
	lockMine                          // this very process holds it already (the node twice in one run): refuse
	lockSwitching                     // no live holder, but a switch unit still runs: wait for it to end
)

// deployer is who takes a lock: its host, pid and process space (lockHolder.Where).
type deployer struct {
	Host  string
	PID   int
	Where string
}

// holderGone tells whether the holder's process has ended: only a deployer in the
// same process space (same kernel boot, same pid namespace) can tell; alive is
// asked about the pid then (a reused pid reads as alive: the lease decides).
func holderGone(h *lockHolder, me deployer, alive func(pid int) bool) bool {
	return h.Where != "-" && h.Where == me.Where && h.PID != me.PID && !alive(h.PID)
}

// decideLock decides from a read of the lock. A live holder's lease is waited for
// (or refused). Without a live holder (none, lease ended, or its process gone) the
// lock is taken, unless a switch unit still runs: a deployer killed mid-switch
// leaves its unit running, and its lock is broken only once that ended.
func decideLock(st lockState, me deployer, alive func(pid int) bool) lockDecision {
	h := st.Holder
	live := h != nil && st.Now < h.Expires && !st.HolderGone && !holderGone(h, me, alive)
	switch {
	case live && h.Host == me.Host && h.PID == me.PID && h.Where == me.Where:
		return lockMine
	case live:
		return lockHeld
	case len(st.Running) > 0:
		return lockSwitching
	case h == nil:
		return lockFree
	case st.Now >= h.Expires:
		return lockExpired
	}
	return lockAbandoned
}

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
func lockIdentity() deployer {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	where := "-"
	boot, err1 := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, err2 := os.Readlink("/proc/self/ns/pid")
	if err1 == nil && err2 == nil {
		where = unsafeHostChars.ReplaceAllString(strings.TrimSpace(string(boot))+"/"+ns, "_")
	}
	return deployer{Host: unsafeHostChars.ReplaceAllString(host, "_"), PID: os.Getpid(), Where: where}
}

var unsafeHostChars = regexp.MustCompile(`[^A-Za-z0-9._:/-]`)

// processAlive tells whether pid is a process of this machine's pid namespace
// (kill(2) with signal 0: EPERM still means it exists).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A killed process whose parent died with it stays a zombie until init reaps
	// it (the tf methods' provider, orphaned by a killed OpenTofu): kill(2) still
	// finds it, but it holds nothing any more.
	return !zombie(pid)
}

// zombie tells whether /proc says pid has exited and waits to be reaped (state Z
// or X, the third field of /proc/PID/stat, after the parenthesised command name).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'Z' || b[i+2] == 'X'
}

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
		return lockState{}, fmt.Errorf("reading the lock exited %d: %s", code, lastLine(errOut))
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
		return lockState{}, nil, fmt.Errorf("reading the lock exited %d: %s", code, lastLine(errOut))
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
				return stopWith(exitcode.Infra, "deploy lock: taking it exited %d: %s", code, lastLine(errOut))
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
				r.log("warn", "%s: deploy lock: renewing it exited %d: %s (retrying)", r.d.Node, code, lastLine(errOut))
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
		r.log("warn", "%s: conclude: releasing the deploy lock exited %d: %s (its lease ends it)", r.d.Node, code, lastLine(errOut))
	}
}
