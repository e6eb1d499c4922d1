package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 15 item 2: the node-side deploy lock, end to end over the ssh method (and
// the tf method) against test-bed nodes.

// bgRun is a switchyard run in the background whose JSON events can be awaited.
type bgRun struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	mu     sync.Mutex
	events []map[string]any
	seen   chan struct{} // signalled on every event
	done   chan struct{}
	err    error
}

// startSwitchyard starts the binary with env and args (which must ask for JSON).
func startSwitchyard(t *testing.T, env []string, args ...string) *bgRun {
	t.Helper()
	return startBackground(t, false, env, args...)
}

// startBackground starts the binary in the background; group puts it in a process
// group of its own, so that a kill of the group reaches everything it started.
func startBackground(t *testing.T, group bool, env []string, args ...string) *bgRun {
	t.Helper()
	b := &bgRun{seen: make(chan struct{}, 1), done: make(chan struct{})}
	b.cmd = exec.Command(binary, args...)
	b.cmd.Env = append(append(os.Environ(), fastEnv...), env...)
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
	b.cmd.Stderr = &b.stderr
	pipe, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var e map[string]any
			_ = json.Unmarshal(line, &e)
			b.mu.Lock()
			b.stdout.Write(line)
			b.stdout.WriteByte('\n')
			b.events = append(b.events, e)
			b.mu.Unlock()
			select {
			case b.seen <- struct{}{}:
			default:
			}
		}
		b.err = b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			if group {
				_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			} else {
				_ = b.cmd.Process.Signal(syscall.SIGCONT)
				_ = b.cmd.Process.Kill()
			}
			<-b.done
		}
	})
	return b
}

// await waits until an event matches, failing the test after d.
func (b *bgRun) await(t *testing.T, d time.Duration, what string, match func(map[string]any) bool) {
	t.Helper()
	deadline := time.After(d)
	for {
		b.mu.Lock()
		for _, e := range b.events {
			if e != nil && match(e) {
				b.mu.Unlock()
				return
			}
		}
		b.mu.Unlock()
		select {
		case <-b.seen:
		case <-b.done:
			b.mu.Lock()
			for _, e := range b.events {
				if e != nil && match(e) {
					b.mu.Unlock()
					return
				}
			}
			b.mu.Unlock()
			t.Fatalf("switchyard ended (%v) before %s; stdout:\n%s\nstderr:\n%s", b.err, what, b.stdout.String(), b.stderr.String())
		case <-deadline:
			t.Fatalf("no %s within %s", what, d)
		}
	}
}

// wait waits for the run's end and returns it as a finished run.
func (b *bgRun) wait(t *testing.T, d time.Duration) run {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(d):
		t.Fatalf("switchyard still running after %s; stdout so far:\n%s", d, b.stdout.String())
	}
	r := run{stdout: b.stdout.String(), stderr: b.stderr.String()}
	if ee, ok := b.err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if b.err != nil {
		t.Fatalf("switchyard: %v", b.err)
	}
	r.events = parseJSONLines(t, r.stdout)
	return r
}

func lockTaken(e map[string]any) bool {
	return e["kind"] == "log" && strings.Contains(fmt.Sprint(e["msg"]), "deploy lock: taken")
}

// lockTree is an operator tree for node web1 whose toplevel is generation gen (its
// host module differs, so its toplevel does).
func lockTree(t *testing.T, method string, node *testbed.Node, gen string) (string, string) {
	t.Helper()
	return lockTreeOf(t, method, "healthy", node, gen)
}

// lockTreeOf is lockTree with another test closure than healthy.
func lockTreeOf(t *testing.T, method, closure string, node *testbed.Node, gen string) (string, string) {
	t.Helper()
	tree, deployment := treeFor(t, method, closure, map[string]*testbed.Node{"web1": node})
	mod := fmt.Sprintf("{ ... }: { networking.hostName = \"web1\"; } # generation %s\n", gen)
	if err := os.WriteFile(filepath.Join(tree, "hosts", "web1.nix"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	return tree, deployment
}

// nodeState is what the node runs and boots: /run/current-system, the system
// profile and /sbin/init (the container's boot entry), as toplevels.
func nodeState(t *testing.T, node *testbed.Node) [3]string {
	t.Helper()
	return [3]string{node.Readlink(t, "/run/current-system"), node.Readlink(t, "/nix/var/nix/profiles/system"),
		strings.TrimSuffix(bootInit(t, node), "/init")}
}

// noStaleLock checks that no deploy lock is left on the node.
func noStaleLock(t *testing.T, node *testbed.Node) {
	t.Helper()
	if out, err := node.Exec(context.Background(), "cat", "/run/switchyard/lock"); err == nil {
		t.Errorf("a deploy lock is left on the node: %q", out)
	}
}

// holderNamed checks that r was refused (exit 2) naming the holder: the deployer's
// host, pid and start time.
func holderNamed(t *testing.T, r run, pid int) {
	t.Helper()
	host, _ := os.Hostname()
	msg := strings.Join(logMsgs(r), "\n")
	for _, want := range []string{"deploy lock: held by deployer host " + host, fmt.Sprintf("pid %d, since 20", pid), "DEPLOY_LOCK_WAIT"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal does not say %q: %s\nstderr: %s", want, msg, r.stderr)
		}
	}
}

// Two concurrent `ssh apply` on one node: while the first holds the lock the second
// is refused at once (DEPLOY_LOCK_WAIT=0, the default) with exit 2 naming the
// holder, having changed nothing; a third that may wait (DEPLOY_LOCK_WAIT=60) waits
// for the first to finish and then deploys.
func TestLockConcurrentSSHApply(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	treeA, deployment := lockTree(t, "ssh", node, "A")
	treeB, _ := lockTree(t, "ssh", node, "B")
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}

	wantCode(t, switchyard(t, env, "ssh", "apply", "--tree", treeA, "--output", "json"), 0)
	genA := nodeState(t, node)

	// A second deploy of B holds the lock for a while (the test seam pauses it right
	// after taking the lock) ...
	holder := startSwitchyard(t, append(env, "SWITCHYARD_TEST_PAUSE_AFTER_LOCK=25"), "ssh", "apply", "--tree", treeB, "--output", "json")
	holder.await(t, 3*time.Minute, "the holder's lock", lockTaken)

	// ... another deploy of A is refused, naming it, and changes nothing.
	r := switchyard(t, env, "ssh", "apply", "--tree", treeA, "--output", "json")
	wantCode(t, r, 2)
	holderNamed(t, r, holder.cmd.Process.Pid)
	if got := nodeState(t, node); got != genA {
		t.Errorf("the refused deploy changed the node: %v, was %v", got, genA)
	}

	// A deploy that may wait gets the lock once the holder released it.
	waiter := startSwitchyard(t, append(env, "DEPLOY_LOCK_WAIT=120"), "ssh", "apply", "--tree", treeA, "--output", "json")
	hr := holder.wait(t, 5*time.Minute)
	wantCode(t, hr, 0)
	genB := nodeState(t, node)
	if genB[0] == genA[0] || genB[0] != genB[1] || genB[0] != genB[2] {
		t.Errorf("after the holder: node %v, want generation B everywhere (A was %v)", genB, genA)
	}
	wr := waiter.wait(t, 5*time.Minute)
	wantCode(t, wr, 0)
	if countLogs(wr, "web1", "deploy lock: taken") != 1 {
		t.Errorf("the waiting deploy took no lock: %q", logMsgs(wr))
	}
	if got := nodeState(t, node); got != genA {
		t.Errorf("after the waiting deploy of A: node %v, want %v", got, genA)
	}
	noStaleLock(t, node)
}

// Across methods: an `ssh apply` holding the lock refuses a `tf apply` on the same
// node, which changes nothing and names the holder.
func TestLockAcrossMethods(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	node := bed.Node(t)
	treeA, sshDeployment := lockTree(t, "ssh", node, "A")
	treeB, tfDeployment := lockTree(t, "tf", node, "B")
	cache := "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()

	holder := startSwitchyard(t, []string{"DEPLOYMENT=" + sshDeployment, cache, "SWITCHYARD_TEST_PAUSE_AFTER_LOCK=20"},
		"ssh", "apply", "--tree", treeA, "--output", "json")
	holder.await(t, 3*time.Minute, "the ssh deploy's lock", lockTaken)
	before := nodeState(t, node)

	r := switchyard(t, []string{"DEPLOYMENT=" + tfDeployment, cache, "BOOTSTRAP=1", "BOOTSTRAP_SEED=x"}, "tf", "apply", "--tree", treeB, "--output", "json")
	if r.code != 2 {
		t.Errorf("tf apply while ssh apply held the lock: exit %d, want 2: %q", r.code, logMsgs(r))
	}
	host, _ := os.Hostname()
	all := strings.Join(logMsgs(r), "\n") + r.stderr
	if want := fmt.Sprintf("held by deployer host %s, pid %d, since ", host, holder.cmd.Process.Pid); !strings.Contains(all, want) {
		t.Errorf("tf apply's refusal does not name the holder (%q): exit %d\n%s", want, r.code, all)
	}
	if got := nodeState(t, node); got != before {
		t.Errorf("the refused tf apply changed the node: %v, was %v", got, before)
	}
	hr := holder.wait(t, 5*time.Minute)
	wantCode(t, hr, 0)
	noStaleLock(t, node)
}

// A deployer SIGKILLed once its switch starts leaves its lock behind; the next
// apply, on the same machine, sees that the holder's process is gone, waits for its
// switch unit if that still runs, breaks the lock at once (no DEPLOY_LOCK_WAIT, the
// lease of DEPLOY_LOCK_TTL's default far from over), deploys, and leaves no lock
// behind.
func TestLockLeftByKilledDeployerIsBroken(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	treeA, deployment := lockTree(t, "ssh", node, "A")
	treeB, _ := lockTree(t, "ssh", node, "B")
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}

	killed := startSwitchyard(t, env, "ssh", "apply", "--tree", treeA, "--output", "json")
	killed.await(t, 3*time.Minute, "the switch phase", func(e map[string]any) bool {
		return e["kind"] == "phase" && e["phase"] == "switch" && e["state"] == "start"
	})
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	if out, err := node.Exec(context.Background(), "cat", "/run/switchyard/lock"); err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("the killed deployer left no lock (%v): %q", err, out)
	}

	start := time.Now()
	r := switchyard(t, env, "ssh", "apply", "--tree", treeB, "--output", "json")
	wantCode(t, r, 0)
	if time.Since(start) > 100*time.Second {
		t.Errorf("the next apply took %s: it waited for the lease instead of seeing its holder gone", time.Since(start))
	}
	if countLogs(r, "web1", "deploy lock: broke the lock of deployer host") != 1 ||
		countLogs(r, "web1", fmt.Sprintf("pid %d", killed.cmd.Process.Pid)) == 0 ||
		countLogs(r, "web1", "that process is gone") != 1 {
		t.Errorf("the next apply did not say it broke the killed deployer's lock: %q", logMsgs(r))
	}
	st := nodeState(t, node)
	if v := verdicts(t, r)["web1"]; v == nil || st[0] != v["toplevel"] || st[1] != st[0] || st[2] != st[0] {
		t.Errorf("node %v after the apply of B (verdict %v)", st, v)
	}
	noStaleLock(t, node)
}

// Fencing: deployer A is stopped (SIGSTOP) right after it took the lock, before its
// switch, past its lease; deployer B deploys another generation to the end; A is
// resumed (SIGCONT): it changes nothing, exits non-zero naming the lost lock, and
// the node stays on B's generation with profile and boot entry agreeing.
func TestLockFencesAPausedDeployer(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	treeA, deployment := lockTree(t, "ssh", node, "A")
	treeB, _ := lockTree(t, "ssh", node, "B")
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	// Build A beforehand, so its run reaches the lock quickly.
	wantCode(t, switchyard(t, env, "ssh", "plan", "--tree", treeA, "--output", "json"), 0)

	a := startSwitchyard(t, append(env, "DEPLOY_LOCK_TTL=2", "SWITCHYARD_TEST_PAUSE_AFTER_LOCK=3"), "ssh", "apply", "--tree", treeA, "--output", "json")
	a.await(t, 3*time.Minute, "A's lock", lockTaken)
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // past A's lease

	r := switchyard(t, append(env, "DEPLOY_LOCK_WAIT=60"), "ssh", "apply", "--tree", treeB, "--output", "json")
	wantCode(t, r, 0)
	genB := nodeState(t, node)
	if v := verdicts(t, r)["web1"]; v == nil || genB[0] != v["toplevel"] || genB[1] != genB[0] || genB[2] != genB[0] {
		t.Fatalf("node %v after B (verdict %v)", genB, v)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	ar := a.wait(t, 5*time.Minute)
	if ar.code != 3 {
		t.Errorf("A exited %d after losing its lock, want 3: %q", ar.code, logMsgs(ar))
	}
	if !strings.Contains(strings.Join(logMsgs(ar), "\n"), "deploy lock lost") {
		t.Errorf("A does not name the lost lock: exit %d %q", ar.code, logMsgs(ar))
	}
	if countLogs(ar, "web1", "not started") == 0 {
		t.Errorf("A's switch was not refused as fenced: %q", logMsgs(ar))
	}
	if got := nodeState(t, node); got != genB {
		t.Errorf("after A resumed the node is %v, want B's generation %v", got, genB)
	}
	noStaleLock(t, node)
}
