package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// Node is one launched test node. It is deleted when its test ends.
type Node struct {
	Name       string // Incus instance name
	SSHPort    int    // 127.0.0.1 port forwarded to the node's sshd
	HostKey    string // the node's ed25519 host key, "ssh-ed25519 AAAA..."
	KnownHosts string // a known_hosts file pinning HostKey for 127.0.0.1:SSHPort
	KeyFile    string // client private key the node's root trusts

	bed *Bed
}

// launchTimeout bounds a node's boot; a cold container boots in a few seconds.
const launchTimeout = 3 * time.Minute

// Node launches a fresh node for t and deletes it when t ends.
func (b *Bed) Node(t testing.TB) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), launchTimeout)
	defer cancel()
	n, err := b.Launch(ctx, t.Name(), t.TempDir())
	if n != nil {
		t.Cleanup(func() { n.Delete() })
	}
	if err != nil {
		t.Fatalf("launch node: %v", err)
	}
	return n
}

// Delete removes the node; it is safe to call twice.
func (n *Node) Delete() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = incus(ctx, "delete", "--force", n.Name)
}

// Launch starts a node named after label and writes its known_hosts file into dir.
// The caller deletes it (Node.Delete), also when Launch fails with a non-nil node.
func (b *Bed) Launch(ctx context.Context, label, dir string) (*Node, error) {
	n := &Node{Name: nodeName(label), KeyFile: b.KeyFile, bed: b}
	if _, err := incus(ctx, "launch", b.Image, n.Name, "--config", "user.switchyard-testbed=true"); err != nil {
		return nil, err
	}
	if err := n.waitBoot(ctx); err != nil {
		return n, err
	}
	// The image's Nix has the default binary cache, which no test node can reach:
	// each copy would spend seconds in its retries when the node substitutes
	// (switchyard's default). A node with no cache, as the host; a test that
	// wants one configures it.
	if _, err := n.Exec(ctx, "sh", "-c", "echo 'substituters =' >>/etc/nix/nix.conf"); err != nil {
		return n, fmt.Errorf("configure the node's Nix: %w", err)
	}
	pub, err := os.ReadFile(b.KeyFile + ".pub")
	if err != nil {
		return n, err
	}
	// Through exec, as the line above: `incus file push` goes through the instance's
	// SFTP server, whose connection right after boot failed once in a CI run
	// ("Failed getting instance SFTP connection: dial unix .../forkfile.sock").
	// The key is the script's argument, not part of it.
	if _, err := n.Exec(ctx, "sh", "-c", `umask 077 && mkdir -p /root/.ssh && printf '%s\n' "$1" >/root/.ssh/authorized_keys`,
		"sh", strings.TrimSpace(string(pub))); err != nil {
		return n, fmt.Errorf("install client key: %w (%d bytes)", err, len(pub))
	}
	hostKey, err := n.Exec(ctx, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
	if err != nil {
		return n, fmt.Errorf("read host key: %w", err)
	}
	fields := strings.Fields(hostKey)
	if len(fields) < 2 {
		return n, fmt.Errorf("host key %q not understood", hostKey)
	}
	n.HostKey = fields[0] + " " + fields[1]
	if err := n.forwardSSH(ctx); err != nil {
		return n, err
	}
	n.KnownHosts = filepath.Join(dir, "known_hosts")
	line := fmt.Sprintf("[127.0.0.1]:%d %s\n", n.SSHPort, n.HostKey)
	if err := os.WriteFile(n.KnownHosts, []byte(line), 0o644); err != nil {
		return n, err
	}
	return n, n.waitSSH(ctx)
}

// waitBoot waits until systemd finished booting the node. Right after the launch the
// system bus may not exist yet; is-system-running --wait then fails at once.
func (n *Node) waitBoot(ctx context.Context) error {
	var state string
	var err error
	for ctx.Err() == nil {
		state, err = n.Exec(ctx, "systemctl", "is-system-running", "--wait")
		switch strings.TrimSpace(state) {
		case "running", "degraded":
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("node %s did not boot: state %q: %v", n.Name, strings.TrimSpace(state), err)
}

var (
	portMu    sync.Mutex
	portsUsed = map[int]bool{}
)

// forwardSSH adds a proxy device from a free 127.0.0.1 port to the node's own sshd.
// Another process may take the port between the probe and the bind; then try another.
func (n *Node) forwardSSH(ctx context.Context) error {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := FreePort()
		if err != nil {
			return err
		}
		_, err = incus(ctx, "config", "device", "add", n.Name, "ssh", "proxy",
			"listen=tcp:127.0.0.1:"+strconv.Itoa(port), "connect=tcp:127.0.0.1:22")
		if err == nil {
			n.SSHPort = port
			return nil
		}
		lastErr = err
	}
	return fmt.Errorf("forward ssh: %w", lastErr)
}

// FreePort probes a free 127.0.0.1 port, never handing out one port twice in a
// process (a probed port is free only until someone binds it: nodes and VMs of one
// test run must not be given the same one).
func FreePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsUsed[port] {
			portsUsed[port] = true
			return port, nil
		}
	}
}

func (n *Node) waitSSH(ctx context.Context) error {
	var lastErr error
	for ctx.Err() == nil {
		if _, lastErr = n.SSH(ctx, "true"); lastErr == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("ssh to %s never answered: %v", n.Name, lastErr)
}

// Exec runs argv on the node through Incus (no SSH, no shell) and returns stdout;
// a non-zero exit is an *ExitError. It talks to the local daemon's API with our own
// client (transports/incus/api), not through the incus CLI: under load the CLI has
// returned an empty stdout for a command that printed (its websocket reader stops at
// a pong it cannot write, before the buffered output; api's tolerateLatePong).
func (n *Node) Exec(ctx context.Context, argv ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	code, err := n.bed.api.Exec(ctx, n.Name, "", api.ExecRequest{Command: argv}, nil, &stdout, &stderr)
	if err != nil {
		return stdout.String(), fmt.Errorf("incus exec %s %v: %w", n.Name, argv, err)
	}
	if code != 0 {
		return stdout.String(), &ExitError{Node: n.Name, Argv: argv, Code: code, Stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.String(), nil
}

// ExitError is a command that ran on a node and exited non-zero.
type ExitError struct {
	Node   string
	Argv   []string
	Code   int
	Stderr string // its stderr, trimmed
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("incus exec %s %v: exit status %d: %s", e.Node, e.Argv, e.Code, e.Stderr)
}

// ExitCode is the command's exit status.
func (e *ExitError) ExitCode() int { return e.Code }

// MustExec is Exec that fails the test on error.
func (n *Node) MustExec(t testing.TB, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := n.Exec(ctx, argv...)
	if err != nil {
		t.Fatalf("%s: %v", n.Name, err)
	}
	return out
}

// SSHOptions are the ssh(1) options that reach the node with its host key checked.
func (n *Node) SSHOptions() []string {
	return []string{
		"-p", strconv.Itoa(n.SSHPort),
		"-i", n.KeyFile,
		"-o", "IdentitiesOnly=yes",
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=yes",
		"-o", "UserKnownHostsFile=" + n.KnownHosts,
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-o", "HostKeyAlgorithms=ssh-ed25519",
		"-o", "ConnectTimeout=10",
	}
}

// SSHTarget is the user@host ssh(1) connects to.
func (n *Node) SSHTarget() string { return "root@127.0.0.1" }

// SSH runs argv on the node through sshd. Each argument is quoted for the remote
// shell, since the SSH protocol carries one command string.
func (n *Node) SSH(ctx context.Context, argv ...string) (string, error) {
	args := append(n.SSHOptions(), n.SSHTarget(), "--")
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = ShellQuote(a)
	}
	args = append(args, strings.Join(quoted, " "))
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ssh", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("ssh %s %v: %w: %s", n.Name, argv, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// ShellQuote quotes s as one word for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// CopyClosure copies a store path and its closure to the node with nix-copy-closure,
// the reference tool, over the node's forwarded sshd.
func (n *Node) CopyClosure(t testing.TB, storePath string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nix-copy-closure", "--to", n.SSHTarget(), storePath)
	cmd.Env = append(os.Environ(), "NIX_SSHOPTS="+strings.Join(n.SSHOptions(), " "))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nix-copy-closure to %s: %v\n%s", n.Name, err, out)
	}
}

// Switch runs <toplevel>/bin/switch-to-configuration <action> on the node over SSH
// and returns its exit code.
func (n *Node) Switch(t testing.TB, toplevel, action string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := n.SSH(ctx, toplevel+"/bin/switch-to-configuration", action)
	if err == nil {
		return 0
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode()
	}
	t.Fatalf("switch on %s: %v", n.Name, err)
	return -1
}

// UnitProperties reads properties of a unit with systemctl show.
func (n *Node) UnitProperties(t testing.TB, unit string, props ...string) map[string]string {
	t.Helper()
	out := n.MustExec(t, "systemctl", "show", "--property="+strings.Join(props, ","), "--", unit)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// Readlink resolves a symlink on the node; "" when it does not exist.
func (n *Node) Readlink(t testing.TB, path string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var out string
		out, err = n.Exec(ctx, "readlink", "-e", path)
		var ee *ExitError
		switch {
		case err == nil:
			return strings.TrimSpace(out)
		case errors.As(err, &ee) && ee.Code == 1 && ee.Stderr == "":
			return "" // readlink's own, silent answer: no such link, or it dangles
		}
		// The exec itself failed, or readlink said why: ask again, and say so.
		t.Logf("%s: readlink %s: %v", n.Name, path, err)
		time.Sleep(time.Second)
	}
	t.Errorf("%s: readlink %s: %v", n.Name, path, err)
	return ""
}
