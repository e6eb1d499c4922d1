package ssh_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/ssh"
)

// A node behind a jump host, from the user's ssh config: one TCP connection to
// the jump host, host keys checked on both hops.
func TestNodeProxyJump(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	target := bed.Node(t)
	jump := bed.Node(t)
	testbed.ForwardThrough(t, jump, target)
	conf, known := testbed.JumpFiles(t, jump, jump.HostKey, target.HostKey)

	newTr := func(known string) *ssh.Transport {
		tr, err := ssh.New(ssh.Config{Host: "target", SSHConfigFile: conf, KnownHostsFile: known,
			KeyFiles: []string{target.KeyFile}, DialTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	tr := newTr(known)
	if got, want := tr.Target(), fmt.Sprintf("ssh root@127.0.0.1:%d", testbed.JumpTargetPort); got != want {
		t.Errorf("Target() = %q, want %q", got, want)
	}
	// The nodes share a host name (the image's): tell them apart by a file.
	target.MustExec(t, "sh", "-c", "echo target > /root/which-node")
	jump.MustExec(t, "sh", "-c", "echo jump > /root/which-node")
	for i := 0; i < 3; i++ {
		if code, out := run(t, tr, effects.Command{Argv: []string{"cat", "/root/which-node"}}); code != 0 || out != "target\n" {
			t.Fatalf("through the jump host: exit %d, %q, want the target", code, out)
		}
	}
	if n := ssh.Dials(tr); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
	if n := established(t, jump); n != 1 {
		t.Errorf("%d connections to the jump host's sshd, want 1", n)
	}
	if n := established(t, target); n != 1 {
		t.Errorf("%d connections to the target's sshd, want 1", n)
	}

	// The jump host's connection cut (its sshd process is "sshd: root": no
	// session, only the channel to the target): the next Run goes through a new chain.
	jump.MustExec(t, "pkill", "-f", "^sshd: root")
	if code, out := run(t, tr, effects.Command{Argv: []string{"echo", "back"}}); code != 0 || out != "back\n" {
		t.Errorf("Run after the jump connection was cut: exit %d, %q", code, out)
	}
	if n := ssh.Dials(tr); n != 2 {
		t.Errorf("%d dials after the cut, want 2", n)
	}
	// The old chain's hop to the target ended with it.
	deadline := time.Now().Add(10 * time.Second)
	for n := established(t, target); n != 1; n = established(t, target) {
		if time.Now().After(deadline) {
			t.Errorf("%d connections to the target's sshd after the reconnect, want 1", n)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A wrong host key on either hop refuses the node, naming that hop.
	for name, c := range map[string]struct{ jumpKey, targetKey, names string }{
		"jump host": {testbed.StrangerHostKey(t), target.HostKey, fmt.Sprintf("jump host 127.0.0.1:%d", jump.SSHPort)},
		"target":    {jump.HostKey, testbed.StrangerHostKey(t), fmt.Sprintf("127.0.0.1:%d", testbed.JumpTargetPort)},
	} {
		_, known := testbed.JumpFiles(t, jump, c.jumpKey, c.targetKey)
		tr := newTr(known)
		_, err := tr.Run(ctxFor(t, time.Minute), effects.Command{Argv: []string{"touch", "/root/touched-through-jump"}})
		if !errors.Is(err, effects.ErrRefused) {
			t.Errorf("%s key wrong: err = %v, want ErrRefused", name, err)
		} else if !strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), "does not match known_hosts") {
			t.Errorf("%s key wrong: error does not name %q: %v", name, c.names, err)
		}
	}
	if out, err := target.Exec(ctxFor(t, time.Minute), "ls", "/root/touched-through-jump"); err == nil {
		t.Errorf("the target was touched: %q", out)
	}
}

// A user without passwordless sudo is refused at once with ErrNoSudo, naming the
// user and sudo; one with it runs every command as root.
func TestNodeSudo(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	addUser(t, node, "nosudo", "")
	addUser(t, node, "pwsudo", "%sudo")
	addUser(t, node, "deploy", "NOPASSWD")

	for _, user := range []string{"nosudo", "pwsudo"} {
		tr := nodeTransport(t, node, func(c *ssh.Config) { c.User = user })
		start := time.Now()
		_, err := tr.Run(ctxFor(t, time.Minute), effects.Command{Argv: []string{"touch", "/root/touched-by-" + user}})
		if !errors.Is(err, effects.ErrNoSudo) || errors.Is(err, effects.ErrUnreachable) {
			t.Errorf("%s: err = %v, want ErrNoSudo", user, err)
			continue
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("%s: the refusal took %s", user, d)
		}
		for _, s := range []string{user, "sudo", fmt.Sprintf("127.0.0.1:%d", node.SSHPort)} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error lacks %q: %v", user, s, err)
			}
		}
		// Sticky: no second connection.
		if _, err := tr.Run(ctxFor(t, time.Minute), effects.Command{Argv: []string{"true"}}); !errors.Is(err, effects.ErrNoSudo) {
			t.Errorf("%s: second Run: %v", user, err)
		}
		if err := tr.CopyClosure(ctxFor(t, time.Minute), []string{"/nix/store/00000000000000000000000000000000-x"}); !errors.Is(err, effects.ErrNoSudo) {
			t.Errorf("%s: CopyClosure: %v", user, err)
		}
		if n := ssh.Dials(tr); n != 1 {
			t.Errorf("%s: %d dials, want 1", user, n)
		}
		t.Logf("%s: %v", user, err)
	}
	if out := node.MustExec(t, "sh", "-c", "ls /root/touched-by-* 2>/dev/null || true"); strings.TrimSpace(out) != "" {
		t.Errorf("node touched: %q", out)
	}

	tr := nodeTransport(t, node, func(c *ssh.Config) { c.User = "deploy" })
	if code, out := run(t, tr, effects.Command{Argv: []string{"id", "-u"}}); code != 0 || out != "0\n" {
		t.Errorf("id -u as deploy: exit %d, %q", code, out)
	}
	// Stdin and the exit status pass through sudo.
	if code, out := run(t, tr, effects.Command{Argv: []string{"sh", "-c", "cat; exit 5"}, Stdin: strings.NewReader("through sudo\n")}); code != 5 || out != "through sudo\n" {
		t.Errorf("stdin through sudo: exit %d, %q", code, out)
	}
	// Binary data passes through sudo unchanged (no terminal in between).
	data := make([]byte, 1<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if code, out := run(t, tr, effects.Command{Argv: []string{"sha256sum"}, Stdin: bytes.NewReader(data)}); code != 0 ||
		!strings.HasPrefix(out, hex.EncodeToString(sum[:])+" ") {
		t.Errorf("1 MiB through sudo: exit %d, %q, want %x", code, out, sum)
	}
	// A command name sudo would read as a variable is refused before the node.
	if _, err := tr.Run(ctxFor(t, time.Minute), effects.Command{Argv: []string{"A=b"}}); err == nil {
		t.Error("argv0 A=b accepted under sudo")
	}
}

// addUser creates a login user trusting the test bed's key. sudo is "" (no sudo
// rights), "%sudo" (sudo with a password: member of the sudo group) or "NOPASSWD".
func addUser(t *testing.T, node *testbed.Node, user, sudo string) {
	t.Helper()
	script := fmt.Sprintf(`set -e
useradd -m -s /bin/sh %[1]s
usermod -p '*' %[1]s
install -d -o %[1]s -g %[1]s -m 700 /home/%[1]s/.ssh
install -o %[1]s -g %[1]s -m 600 /root/.ssh/authorized_keys /home/%[1]s/.ssh/authorized_keys
`, user)
	switch sudo {
	case "%sudo":
		script += fmt.Sprintf("usermod -aG sudo %s\n", user)
	case "NOPASSWD":
		script += fmt.Sprintf("echo '%[1]s ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/%[1]s\nchmod 440 /etc/sudoers.d/%[1]s\n", user)
	}
	node.MustExec(t, "sh", "-c", script)
}
