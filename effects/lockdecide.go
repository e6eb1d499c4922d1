package effects

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The lock's decision (lock_test.go): a lock line read, and what a deployer does
// about it, as pure functions of what the node answered and who asks.

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
