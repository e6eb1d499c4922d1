package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// The ssh transport end to end: ssh config and ProxyJump, a user with sudo, and a
// connection cut while the switch runs.

// logs are the msg fields of the run's log events.
func logs(r run) string {
	var b strings.Builder
	for _, e := range r.events {
		if e["kind"] == "log" {
			fmt.Fprintf(&b, "%v\n", e["msg"])
		}
	}
	return b.String()
}

// A deploy through a jump host named by the ssh config (--ssh-config): the node's
// HostName, Port and ProxyJump from the file, host keys checked on both hops.
func TestDeployProxyJump(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	top := bed.Build(t, "healthy", "jump")
	target := bed.Node(t)
	jump := bed.Node(t)
	testbed.ForwardThrough(t, jump, target)

	args := func(conf, known string) []string {
		return []string{"deploy", "--target", "target", "--ssh-config", conf, "--known-hosts", known,
			"--ssh-key", target.KeyFile, "--toplevel", top, "--output", "json"}
	}

	// A wrong host key on either hop: refused before anything changed (exit 2).
	for name, keys := range map[string][2]string{
		"jump host": {testbed.StrangerHostKey(t), target.HostKey},
		"target":    {jump.HostKey, testbed.StrangerHostKey(t)},
	} {
		r := switchyard(t, nil, args(testbed.JumpFiles(t, jump, keys[0], keys[1]))...)
		wantCode(t, r, 2)
		msg := logs(r)
		if !strings.Contains(msg, "target: wait: ") || !strings.Contains(msg, "does not match known_hosts") {
			t.Errorf("%s key wrong: the error does not name the node and the cause:\n%s", name, msg)
		}
		if name == "jump host" && !strings.Contains(msg, fmt.Sprintf("jump host 127.0.0.1:%d", jump.SSHPort)) {
			t.Errorf("jump host key wrong: the error does not name the jump host:\n%s", msg)
		}
	}
	if out, err := target.Exec(context.Background(), "nix-store", "--check-validity", top); err == nil {
		t.Errorf("refused deploys copied the closure: %q", out)
	}

	r := switchyard(t, nil, args(testbed.JumpFiles(t, jump, jump.HostKey, target.HostKey))...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	if v["node"] != "target" || v["target"] != fmt.Sprintf("ssh root@127.0.0.1:%d", testbed.JumpTargetPort) {
		t.Errorf("verdict names node %v, target %v", v["node"], v["target"])
	}
	if sw := v["switch"].(map[string]any); sw["result"] != "ok" || v["ok"] != true {
		t.Errorf("verdict: %v", v)
	}
	if got := target.Readlink(t, "/run/current-system"); got != top {
		t.Errorf("target /run/current-system -> %q, want %q", got, top)
	}
	if got := target.Readlink(t, "/boot/switchyard-default"); got != top {
		t.Errorf("target boot entry -> %q, want %q", got, top)
	}
	if got := jump.Readlink(t, "/run/current-system"); got != "" {
		t.Errorf("the jump host was deployed: /run/current-system -> %q", got)
	}
}

// A user other than root: with passwordless sudo the deploy runs every command
// (the copy too) as root; without it the node fails at once with exit 3, the
// message naming the node and sudo, and nothing changes.
func TestDeploySudoUser(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	top := bed.Build(t, "healthy", "sudo")
	node := bed.Node(t)
	addUser(t, node, "nosudo", false)
	addUser(t, node, "deploy", true)
	args := func(user string) []string {
		return []string{"deploy", "--node", "web1", "--target", fmt.Sprintf("%s@127.0.0.1:%d", user, node.SSHPort),
			"--known-hosts", node.KnownHosts, "--ssh-key", node.KeyFile, "--toplevel", top, "--output", "json"}
	}

	start := time.Now()
	r := switchyard(t, []string{"DEPLOY_WAIT_TIMEOUT=120"}, args("nosudo")...)
	wantCode(t, r, 3)
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("a missing sudo right took %s to fail; it must not wait for DEPLOY_WAIT_TIMEOUT", d)
	}
	msg := logs(r)
	if !strings.Contains(msg, "web1: wait: ") || !strings.Contains(msg, "nosudo") || !strings.Contains(msg, "sudo -n") {
		t.Errorf("the error does not name the node, the user and sudo:\n%s", msg)
	}
	v := r.verdict(t)
	if v["ok"] != false || v["exit_code"] != 3.0 || !strings.Contains(strings.Join(strs(v["reasons"]), ";"), "sudo") {
		t.Errorf("verdict: %v", v)
	}
	if out, err := node.Exec(context.Background(), "nix-store", "--check-validity", top); err == nil {
		t.Errorf("the closure was copied: %q", out)
	}
	if got := node.Readlink(t, "/run/current-system"); got != "" {
		t.Errorf("/run/current-system -> %q after a refused deploy", got)
	}

	r = switchyard(t, nil, args("deploy")...)
	wantCode(t, r, 0)
	v = r.verdict(t)
	if sw := v["switch"].(map[string]any); sw["result"] != "ok" || v["ok"] != true {
		t.Errorf("verdict: %v", v)
	}
	if got := node.Readlink(t, "/run/current-system"); got != top {
		t.Errorf("/run/current-system -> %q, want %q", got, top)
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != top {
		t.Errorf("system profile -> %q, want %q", got, top)
	}
	// The closure belongs to root's store as any copy's does.
	if out := node.MustExec(t, "stat", "-c", "%U", top); strings.TrimSpace(out) != "root" {
		t.Errorf("%s owned by %q", top, out)
	}
}

// addUser creates a login user trusting the test bed's key, with passwordless
// sudo or with no sudo rights at all.
func addUser(t *testing.T, node *testbed.Node, user string, sudo bool) {
	t.Helper()
	script := fmt.Sprintf(`set -e
useradd -m -s /bin/sh %[1]s
usermod -p '*' %[1]s
install -d -o %[1]s -g %[1]s -m 700 /home/%[1]s/.ssh
install -o %[1]s -g %[1]s -m 600 /root/.ssh/authorized_keys /home/%[1]s/.ssh/authorized_keys
`, user)
	if sudo {
		script += fmt.Sprintf("echo '%[1]s ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/%[1]s\nchmod 440 /etc/sudoers.d/%[1]s\n", user)
	}
	node.MustExec(t, "sh", "-c", script)
}

// The connection is cut while the switch runs (slow-switch sleeps 15 s before it
// activates): the switch finishes on the node, the body reconnects, reads the
// switch result and judges the node as after an uncut run.
func TestDeployCutDuringSwitch(t *testing.T) {
	node, top := setup(t, "slow-switch")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, deployArgs(node, "--toplevel", top, "--output", "json")...)
	cmd.Env = append(os.Environ(), fastEnv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	// The node's sshd session processes are "sshd: root@notty"; the listener is
	// "sshd: /usr/sbin/sshd -D [listener] ...", which stays.
	sessions := func() []string {
		out, _ := node.Exec(context.Background(), "pgrep", "-f", "^sshd: root@")
		return strings.Fields(out)
	}
	var (
		out        strings.Builder
		cut        []string
		cutAt      time.Duration
		reconnects = make(chan string, 1)
		watch      sync.WaitGroup
		stopWatch  = make(chan struct{})
	)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil || cut != nil {
			continue
		}
		if e["kind"] == "phase" && e["phase"] == "switch" && e["state"] == "done" {
			cut = sessions()
			if len(cut) == 0 {
				t.Error("no sshd session on the node to cut")
				cut = []string{}
				continue
			}
			node.MustExec(t, "pkill", "-f", "^sshd: root@")
			cutAt = time.Since(start)
			// Watch for the body's new session: a pid not among the cut ones.
			watch.Add(1)
			go func(old []string) {
				defer watch.Done()
				for {
					for _, pid := range sessions() {
						if !contains(old, pid) {
							reconnects <- pid
							return
						}
					}
					select {
					case <-stopWatch:
						return
					case <-time.After(200 * time.Millisecond):
					}
				}
			}(cut)
		}
	}
	werr := cmd.Wait()
	close(stopWatch)
	watch.Wait()
	r := run{stdout: out.String(), stderr: stderr.String()}
	if werr != nil {
		ee, ok := werr.(*exec.ExitError)
		if !ok {
			t.Fatalf("run switchyard: %v", werr)
		}
		r.code = ee.ExitCode()
	}
	r.events = parseJSONLines(t, r.stdout)
	if cut == nil {
		t.Fatalf("no switch done event:\n%s", r.stdout)
	}
	select {
	case pid := <-reconnects:
		t.Logf("cut sessions %v at %s; the body reconnected (session %s)", cut, cutAt, pid)
	default:
		t.Errorf("no new sshd session after the cut: the body never reconnected")
	}

	wantCode(t, r, 0)
	v := r.verdict(t)
	if sw := v["switch"].(map[string]any); sw["result"] != "ok" || sw["exit_code"] != 0.0 {
		t.Errorf("switch: %v", sw)
	}
	if v["ok"] != true || v["reachable"] != true || v["system_state"] != "running" || v["toplevel"] != top || v["boot_entry"] != top {
		t.Errorf("verdict: %v", v)
	}
	if got := strs(units(t, v, "failed")); len(got) != 0 {
		t.Errorf("failed units: %v", got)
	}
	if ms, _ := v["phases_ms"].(map[string]any)["switch-result"].(float64); ms < 10000 {
		t.Errorf("switch-result took %v ms; the slow switch takes 15 s", ms)
	}
	if got := node.Readlink(t, "/run/current-system"); got != top {
		t.Errorf("/run/current-system -> %q, want %q", got, top)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got != top {
		t.Errorf("boot entry -> %q, want %q", got, top)
	}
	if st := node.UnitProperties(t, "hello.service", "ActiveState")["ActiveState"]; st != "active" {
		t.Errorf("hello.service %s", st)
	}
	// The switch's transient unit is gone: its result was read and it was unloaded.
	if out := node.MustExec(t, "sh", "-c", "systemctl list-units --all --no-legend 'switchyard-switch-*' || true"); strings.TrimSpace(out) != "" {
		t.Errorf("switch unit left loaded: %q", out)
	}
}
