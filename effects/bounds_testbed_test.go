package effects_test

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/ssh"
)

// The deploy body against a hostile real node over SSH (SPEC 6.9): a node whose
// systemctl answers is-system-running with 1 GB fails the wait phase with "node
// answer exceeds 64 MiB" while the deployer's memory stays far below the answer,
// and a node whose find never answers fails the snapshot at the command's
// deadline, not when the run's own bounds run out.
func TestBodyHostileNode(t *testing.T) {
	node := testbed.Require(t).Node(t)
	const deadline = 2 * time.Second
	transport := func(t *testing.T, commandTimeout time.Duration) effects.Transport {
		tr, err := ssh.New(ssh.Config{Host: "127.0.0.1", Port: node.SSHPort, SSHConfigFile: ssh.NoSSHConfig,
			KnownHostsFile: node.KnownHosts, KeyFiles: []string{node.KeyFile}, DialTimeout: 20 * time.Second,
			CommandTimeout: commandTimeout})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	cacheDir := t.TempDir()
	cfg, err := effects.ConfigFromEnv(func(name string) string {
		return map[string]string{"DEPLOY_VERDICT_ONLY": "1", "DEPLOY_WAIT_TIMEOUT": "1", "DEPLOY_EVAL_CACHE_DIR": cacheDir}[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	hostile := func(t *testing.T, program, script string) {
		node.MustExec(t, "sh", "-c", `printf '%s\n' '#!/bin/sh' "$2" >"/usr/local/bin/$1" && chmod 755 "/usr/local/bin/$1"`, "sh", program, script)
		t.Cleanup(func() { node.MustExec(t, "rm", "-f", "/usr/local/bin/"+program) })
	}
	deploy := func(t *testing.T, tr effects.Transport, cfg effects.Config) (effects.Result, []string, time.Duration) {
		ev := &effectstest.Events{}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		start := time.Now()
		res := (&effects.Deploy{Node: "web1", Transport: tr, Config: cfg, Reporter: ev}).Run(ctx)
		took := time.Since(start)
		var errs []string
		for _, l := range ev.Logs() {
			if strings.HasPrefix(l, "error ") {
				if len(l) > 300 {
					l = l[:300] + "..."
				}
				errs = append(errs, l)
			}
		}
		t.Logf("exit %d after %v: %q", res.ExitCode, took.Round(time.Millisecond), errs)
		return res, errs, took
	}
	has := func(lines []string, parts ...string) bool {
	next:
		for _, l := range lines {
			for _, p := range parts {
				if !strings.Contains(l, p) {
					continue next
				}
			}
			return true
		}
		return false
	}

	t.Run("answer-bounded", func(t *testing.T) {
		hostile(t, "systemctl", `[ "$1" = is-system-running ] && exec head -c 1000000000 /dev/zero
exec /bin/systemctl "$@"`)
		// A deadline the answer cannot reach first, however loaded the machine.
		tr := transport(t, 2*time.Minute)
		// The wait likewise: 64 MiB must reach the body before the wait gives up,
		// which on a loaded machine takes more than the other case's 1 s.
		slow := cfg
		slow.WaitTimeout = 10 * time.Second
		base := resetPeak(t)
		res, errs, took := deploy(t, tr, slow)
		grew := status(t, "VmHWM") - base
		t.Logf("peak RSS grew by %d MiB", grew>>20)
		if res.ExitCode == 0 || !has(errs, "web1: wait: ", "node answer exceeds 64 MiB") {
			t.Errorf("exit %d, errors %q; want the wait phase failed with node answer exceeds 64 MiB", res.ExitCode, errs)
		}
		// The 64 MiB that reach the body's bytes.Buffer, the 32 MiB its last
		// doubling copied from, the string the body makes of it (64 MiB more) and
		// the collector's headroom over all that: measured 290 MiB, a third of
		// the answer; reading all of it would hold several times its 954 MiB.
		if grew > 6*64<<20 {
			t.Errorf("the deployer's peak RSS grew by %d MiB; want below %d MiB (the answer is 954 MiB)", grew>>20, 6*64)
		}
		if took > 30*time.Second {
			t.Errorf("took %v", took)
		}
	})

	t.Run("silent-node-deadline", func(t *testing.T) {
		hostile(t, "find", "exec sleep 3600.5")
		res, errs, took := deploy(t, transport(t, deadline), cfg)
		if res.ExitCode == 0 || !has(errs, "web1: snapshot: ", "no answer within 2s (the command's deadline)") {
			t.Errorf("exit %d, errors %q; want the snapshot failed at the command's deadline", res.ExitCode, errs)
		}
		// The wait's attempt, the snapshot's deadline, the kill; not the run's 90 s.
		if took > 20*time.Second {
			t.Errorf("took %v; want about the command's deadline of %v", took.Round(time.Millisecond), deadline)
		}
		if left := strings.TrimSpace(node.MustExec(t, "sh", "-c", "pgrep -af '[s]leep 3600.5' || true")); left != "" {
			t.Errorf("left running on the node: %q", left)
		}
	})
}

// resetPeak collects garbage, resets the peak RSS (VmHWM) to the current RSS
// (proc(5): 5 to clear_refs) and returns that RSS in bytes.
func resetPeak(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
	return status(t, "VmRSS")
}

// status reads a kB field of /proc/self/status, in bytes.
func status(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
