package ssh_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/ssh"
)

// Tests against real nodes of the test bed: sshd in an Incus container, reached on
// a loopback port, its host key pinned in node.KnownHosts.

func nodeTransport(t *testing.T, node *testbed.Node, mutate func(*ssh.Config)) *ssh.Transport {
	t.Helper()
	cfg := ssh.Config{
		Host:           "127.0.0.1",
		Port:           node.SSHPort,
		KnownHostsFile: node.KnownHosts,
		KeyFiles:       []string{node.KeyFile},
		DialTimeout:    20 * time.Second,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	tr, err := ssh.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// run runs argv and returns exit status and stdout, failing the test on a transport error.
func run(t *testing.T, tr *ssh.Transport, cmd effects.Command) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	code, err := tr.Run(ctxFor(t, 2*time.Minute), cmd)
	if err != nil {
		t.Fatalf("Run %q: %v (stderr %q)", cmd.Argv, err, errOut.String())
	}
	return code, out.String()
}

// established counts the TCP connections to the node's sshd (ss prints one line
// per connection, -H without a header).
func established(t *testing.T, node *testbed.Node) int {
	t.Helper()
	out := node.MustExec(t, "ss", "-Htn", "state", "established", "( sport = :22 )")
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) != "" {
			n++
		}
	}
	return n
}

func TestNodeRun(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	tr := nodeTransport(t, node, nil)
	if want := fmt.Sprintf("ssh root@127.0.0.1:%d", node.SSHPort); tr.Target() != want {
		t.Errorf("Target() = %q, want %q", tr.Target(), want)
	}

	t.Run("argv verbatim", func(t *testing.T) {
		args := []string{"a b", "it's", `"dq"`, "$HOME", "$(id)", "`id`", "a;b", "a && b | c", "*", "~root", "", "new\nline", `back\slash`, "-n", "%s", "\t"}
		code, out := run(t, tr, effects.Command{Argv: append([]string{"printf", `[%s]\n`}, args...)})
		var want strings.Builder
		for _, a := range args {
			want.WriteString("[" + a + "]\n")
		}
		if code != 0 || out != want.String() {
			t.Errorf("exit %d, out %q\nwant %q", code, out, want.String())
		}
	})

	t.Run("exit status", func(t *testing.T) {
		for _, c := range []struct {
			argv []string
			want int
		}{
			{[]string{"true"}, 0},
			{[]string{"false"}, 1},
			{[]string{"sh", "-c", "exit 7"}, 7},
			{[]string{"sh", "-c", "kill -TERM $$"}, 143},
			{[]string{"switchyard-no-such-command"}, 127},
		} {
			if code, _ := run(t, tr, effects.Command{Argv: c.argv}); code != c.want {
				t.Errorf("%q exited %d, want %d", c.argv, code, c.want)
			}
		}
	})

	t.Run("streams", func(t *testing.T) {
		in := strings.Repeat("switchyard stdin line\n", 50000) // about 1 MiB
		code, out := run(t, tr, effects.Command{Argv: []string{"sha256sum"}, Stdin: strings.NewReader(in)})
		want := node.MustExec(t, "sh", "-c", fmt.Sprintf("yes 'switchyard stdin line' | head -n %d | sha256sum", 50000))
		if code != 0 || out != want {
			t.Errorf("exit %d: remote sha256 %q, want %q", code, out, want)
		}
		var errOut bytes.Buffer
		code, err := tr.Run(ctxFor(t, time.Minute), effects.Command{Argv: []string{"sh", "-c", "echo to-stderr >&2; echo to-stdout"}, Stderr: &errOut})
		if err != nil || code != 0 || errOut.String() != "to-stderr\n" {
			t.Errorf("stderr: exit %d, err %v, %q", code, err, errOut.String())
		}
		// A nil Stdin is empty: cat ends at once.
		if code, out := run(t, tr, effects.Command{Argv: []string{"cat"}}); code != 0 || out != "" {
			t.Errorf("cat with no stdin: exit %d, %q", code, out)
		}
	})

	t.Run("one connection", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, err := tr.Run(ctxFor(t, time.Minute), effects.Command{Argv: []string{"sleep", "0.3"}})
				if err == nil && code != 0 {
					err = fmt.Errorf("exit %d", code)
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("concurrent Run: %v", err)
			}
		}
		if n := established(t, node); n != 1 {
			t.Errorf("%d connections established to the node's sshd, want 1", n)
		}
		if n := ssh.Dials(tr); n != 1 {
			t.Errorf("%d dials, want 1", n)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		// A command writing output ends once the session is closed.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := tr.Run(ctx, effects.Command{Argv: []string{"sh", "-c", "while :; do echo switchyard-tick; sleep 0.2; done"}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's", err)
		}
		if d := time.Since(start); d > 8*time.Second {
			t.Errorf("cancelled Run took %s", d)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, _ := node.Exec(ctx, "pgrep", "-f", "switchyard-tick")
			cancel()
			if strings.TrimSpace(out) == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cancelled command still runs on the node: %q", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// A silent command of a root login (sshd refuses signals there): Run
		// still returns within its grace periods, and the command has ended on
		// the node (issue 15 item 3).
		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if _, err := tr.Run(ctx, effects.Command{Argv: []string{"sleep", "417"}}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the context's", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("cancelled Run took %s", d)
		}
		if code, _ := run(t, tr, effects.Command{Argv: []string{"true"}}); code != 0 {
			t.Errorf("Run after a cancel exited %d", code)
		}
		if out, _ := node.Exec(ctxFor(t, 10*time.Second), "pgrep", "-af", "sleep 417"); strings.TrimSpace(out) != "" {
			t.Errorf("the cancelled silent command still runs on the node: %q", out)
			_, _ = node.Exec(ctxFor(t, 10*time.Second), "pkill", "-f", "sleep 417")
		}
	})

	t.Run("reconnect", func(t *testing.T) {
		before := ssh.Dials(tr)
		node.MustExec(t, "pkill", "-f", "sshd:.*@")
		code, out := run(t, tr, effects.Command{Argv: []string{"echo", "back"}})
		if code != 0 || out != "back\n" {
			t.Errorf("Run after the connection was killed: exit %d, %q", code, out)
		}
		if n := ssh.Dials(tr) - before; n != 1 {
			t.Errorf("%d dials after the kill, want 1", n)
		}
		if n := established(t, node); n != 1 {
			t.Errorf("%d connections after the reconnect, want 1", n)
		}
	})

	t.Run("closed", func(t *testing.T) {
		tr2 := nodeTransport(t, node, nil)
		run(t, tr2, effects.Command{Argv: []string{"true"}})
		if err := tr2.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := tr2.Run(context.Background(), effects.Command{Argv: []string{"true"}}); err == nil {
			t.Error("Run after Close succeeded")
		}
	})
}

func TestNodeHostKeyMismatch(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	_, other, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, err := gossh.NewPublicKey(other.Public())
	if err != nil {
		t.Fatal(err)
	}
	otherLine := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(otherPub)))
	wrongKnown := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(wrongKnown, []byte(fmt.Sprintf("[127.0.0.1]:%d %s\n", node.SSHPort, otherLine)), 0o600); err != nil {
		t.Fatal(err)
	}
	top := bed.Build(t, "healthy", "mismatch")
	for name, mutate := range map[string]func(*ssh.Config){
		"known_hosts": func(c *ssh.Config) { c.KnownHostsFile = wrongKnown },
		"pinned":      func(c *ssh.Config) { c.KnownHostsFile, c.HostKey = "", otherLine },
	} {
		tr := nodeTransport(t, node, mutate)
		_, err := tr.Run(ctxFor(t, time.Minute), effects.Command{Argv: []string{"touch", "/root/touched-by-" + name}})
		if !errors.Is(err, effects.ErrRefused) {
			t.Errorf("%s: Run err = %v, want ErrRefused", name, err)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d", node.SSHPort)) {
			t.Errorf("%s: error does not name the host: %v", name, err)
		}
		if err := tr.CopyClosure(ctxFor(t, time.Minute), []string{top}); !errors.Is(err, effects.ErrRefused) {
			t.Errorf("%s: CopyClosure err = %v, want ErrRefused", name, err)
		}
		if err := tr.FinalizeBootloader(ctxFor(t, time.Minute), top); !errors.Is(err, effects.ErrRefused) {
			t.Errorf("%s: FinalizeBootloader err = %v, want ErrRefused", name, err)
		}
		if n := ssh.Dials(tr); n != 1 {
			t.Errorf("%s: %d dials, want 1 (a refusal is never retried)", name, n)
		}
	}
	// Untouched: nothing ran, nothing was copied.
	if out := node.MustExec(t, "sh", "-c", "ls /root/touched-by-* 2>/dev/null; nix-store --check-validity --print-invalid "+top); strings.TrimSpace(out) != top {
		t.Errorf("node touched: %q", out)
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != "" {
		t.Errorf("system profile set to %q", got)
	}

	// The right pinned key works, without any known_hosts file.
	tr := nodeTransport(t, node, func(c *ssh.Config) { c.KnownHostsFile, c.HostKey = "/nonexistent", node.HostKey })
	if code, out := run(t, tr, effects.Command{Argv: []string{"echo", "pinned"}}); code != 0 || out != "pinned\n" {
		t.Errorf("pinned key: exit %d, %q", code, out)
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	known := filepath.Join(t.TempDir(), "known_hosts")
	key, _, _ := ed25519.GenerateKey(rand.Reader)
	pub, _ := gossh.NewPublicKey(key)
	if err := os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%d %s", port, gossh.MarshalAuthorizedKey(pub))), 0o600); err != nil {
		t.Fatal(err)
	}
	tr, err := ssh.New(ssh.Config{Host: "127.0.0.1", Port: port, KnownHostsFile: known, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for i := 0; i < 2; i++ {
		_, err = tr.Run(context.Background(), effects.Command{Argv: []string{"true"}})
		if !errors.Is(err, effects.ErrUnreachable) || errors.Is(err, effects.ErrRefused) {
			t.Errorf("Run %d: err = %v, want ErrUnreachable", i, err)
		}
	}
	if n := ssh.Dials(tr); n != 2 {
		t.Errorf("%d dials, want one per Run", n)
	}
	if err := tr.CopyClosure(context.Background(), []string{"/nix/store/x"}); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("CopyClosure: err = %v, want ErrUnreachable", err)
	}
}

func TestNodeCopyAndBootloader(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	top := bed.Build(t, "healthy", "")
	top2 := bed.Build(t, "healthy", "second")
	tr := nodeTransport(t, node, nil)

	// Before anything: no running generation to revert to.
	if err := tr.RevertBootloader(ctxFor(t, time.Minute)); err == nil || !strings.Contains(err.Error(), "/run/current-system") {
		t.Errorf("RevertBootloader on a node without /run/current-system: %v", err)
	}

	if err := tr.CopyClosure(ctxFor(t, 5*time.Minute), []string{top}); err != nil {
		t.Fatalf("CopyClosure: %v", err)
	}
	if out := node.MustExec(t, "nix-store", "--check-validity", "--print-invalid", top); strings.TrimSpace(out) != "" {
		t.Fatalf("%s not valid after the copy: %q", top, out)
	}
	// Again: nothing missing, still fine.
	if err := tr.CopyClosure(ctxFor(t, 5*time.Minute), []string{top}); err != nil {
		t.Fatalf("second CopyClosure: %v", err)
	}

	// Path: a command found only in <top>/sw/bin.
	code, out := run(t, tr, effects.Command{Argv: []string{"switchyard-hello"}, Path: []string{top + "/sw/bin"}})
	if code != 0 || out != "hello from switchyard\n" {
		t.Errorf("switchyard-hello with Path: exit %d, %q", code, out)
	}
	if code, _ := run(t, tr, effects.Command{Argv: []string{"switchyard-hello"}}); code != 127 {
		t.Errorf("switchyard-hello without Path exited %d, want 127", code)
	}

	// A user other than root: every command through sudo -n, PATH kept.
	node.MustExec(t, "sh", "-c", `set -e
useradd -m -s /bin/sh deploy
usermod -p '*' deploy
install -d -o deploy -g deploy -m 700 /home/deploy/.ssh
install -o deploy -g deploy -m 600 /root/.ssh/authorized_keys /home/deploy/.ssh/authorized_keys
echo 'deploy ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/deploy`)
	trSudo := nodeTransport(t, node, func(c *ssh.Config) { c.User = "deploy" })
	if code, out := run(t, trSudo, effects.Command{Argv: []string{"id", "-un"}}); code != 0 || out != "root\n" {
		t.Errorf("id -un as deploy: exit %d, %q", code, out)
	}
	code, out = run(t, trSudo, effects.Command{Argv: []string{"sh", "-c", `switchyard-hello; printf '%s\n' "$1"`, "sh", "it's $HOME"},
		Path: []string{top + "/sw/bin"}})
	if code != 0 || out != "hello from switchyard\nit's $HOME\n" {
		t.Errorf("sudo with Path: exit %d, %q", code, out)
	}
	if code, _ := run(t, trSudo, effects.Command{Argv: []string{"sh", "-c", "exit 9"}}); code != 9 {
		t.Errorf("sudo: exit %d, want 9", code)
	}

	// The copy's command finds its stdin a 1 MiB pipe (wideStdin), as root and
	// under sudo; any other command the kernel's 64 KiB. perl asks F_GETPIPE_SZ.
	pipeSize := []string{"perl", "-e", "print fcntl(STDIN, 1032, 0)"}
	for _, c := range []struct {
		tr   *ssh.Transport
		wide bool
		want string
	}{{tr, true, "1048576"}, {trSudo, true, "1048576"}, {tr, false, "65536"}, {trSudo, false, "65536"}} {
		var out, errOut bytes.Buffer
		cmd := effects.Command{Argv: pipeSize, Stdin: strings.NewReader("x"), Stdout: &out, Stderr: &errOut}
		var code int
		var err error
		if c.wide {
			code, err = ssh.RunWide(c.tr, ctxFor(t, time.Minute), cmd)
		} else {
			code, err = c.tr.Run(ctxFor(t, time.Minute), cmd)
		}
		if err != nil || code != 0 || out.String() != c.want {
			t.Errorf("stdin pipe size (%s, wide %v): exit %d, %v, %q (stderr %q), want %s", c.tr.Target(), c.wide, code, err, out.String(), errOut.String(), c.want)
		}
	}

	if code := node.Switch(t, top, "switch"); code != 0 {
		t.Fatalf("fixture switch exited %d", code)
	}
	if err := tr.FinalizeBootloader(ctxFor(t, 2*time.Minute), top); err != nil {
		t.Fatalf("FinalizeBootloader: %v", err)
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != top {
		t.Errorf("system profile -> %q, want %q", got, top)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got != top {
		t.Errorf("boot entry -> %q, want %q", got, top)
	}

	// The pinned-key copy (a temporary known_hosts file) of a second generation,
	// then finalize it and revert the boot entry to the running one.
	trPinned := nodeTransport(t, node, func(c *ssh.Config) { c.KnownHostsFile, c.HostKey = "", node.HostKey })
	if err := trPinned.CopyClosure(ctxFor(t, 5*time.Minute), []string{top2}); err != nil {
		t.Fatalf("CopyClosure with a pinned key: %v", err)
	}
	if err := tr.FinalizeBootloader(ctxFor(t, 2*time.Minute), top2); err != nil {
		t.Fatalf("FinalizeBootloader(top2): %v", err)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got != top2 {
		t.Errorf("boot entry -> %q, want %q", got, top2)
	}
	if err := tr.RevertBootloader(ctxFor(t, 2*time.Minute)); err != nil {
		t.Fatalf("RevertBootloader: %v", err)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got != top {
		t.Errorf("boot entry after revert -> %q, want the running %q", got, top)
	}

	// A failing step is named.
	err := tr.FinalizeBootloader(ctxFor(t, time.Minute), "/nix/store/00000000000000000000000000000000-missing")
	if err == nil || !strings.Contains(err.Error(), "set the system profile") {
		t.Errorf("FinalizeBootloader of a missing path: %v", err)
	}
	// /boot a file: the profile is set, switch-to-configuration boot fails.
	node.MustExec(t, "sh", "-c", "mv /boot /boot.away && touch /boot")
	err = tr.FinalizeBootloader(ctxFor(t, time.Minute), top)
	node.MustExec(t, "sh", "-c", "rm /boot && mv /boot.away /boot")
	if err == nil || !strings.HasPrefix(err.Error(), "install the boot entry: "+top+"/bin/switch-to-configuration exited ") {
		t.Errorf("FinalizeBootloader with /boot a file: %v", err)
	}
	if n := ssh.Dials(tr); n != 1 {
		t.Errorf("%d dials for the whole sequence, want 1", n)
	}
}

// TestNodeDefaultIdentityFile: with no --ssh-key, no IdentityFile and no agent, the
// key at ~/.ssh/id_ed25519 logs in, as ssh(1) would find it (SPEC 2); a home without
// one gets a clear "no ssh key" error and no connection.
func TestNodeDefaultIdentityFile(t *testing.T) {
	bed := testbed.Require(t)
	node := bed.Node(t)
	t.Setenv("SSH_AUTH_SOCK", "")

	home := t.TempDir()
	t.Setenv("HOME", home)
	tr := nodeTransport(t, node, func(c *ssh.Config) { c.KeyFiles = nil })
	_, err := tr.Run(ctxFor(t, time.Minute), effects.Command{Argv: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "no ssh key") {
		t.Fatalf("Run with no key anywhere: %v, want a \"no ssh key\" error", err)
	}

	key, err := os.ReadFile(node.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	tr = nodeTransport(t, node, func(c *ssh.Config) { c.KeyFiles = nil })
	if code, out := run(t, tr, effects.Command{Argv: []string{"echo", "in"}}); code != 0 || out != "in\n" {
		t.Fatalf("Run with ~/.ssh/id_ed25519: exit %d, %q", code, out)
	}
}
