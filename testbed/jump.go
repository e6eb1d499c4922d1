package testbed

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// JumpTargetPort is where a jump node reaches the target's sshd on its own loopback
// (ForwardThrough).
const JumpTargetPort = 2200

// ForwardThrough makes jump's 127.0.0.1:JumpTargetPort reach target's sshd: an Incus
// proxy device listening inside jump, connecting to the host's loopback port that
// forwards to target. All of it stays on loopback; the nodes have no network.
func ForwardThrough(t testing.TB, jump, target *Node) {
	t.Helper()
	jump.ReachHost(t, "tgt", JumpTargetPort, target.SSHPort)
}

// ReachHost makes n's 127.0.0.1:nodePort reach the host's 127.0.0.1:hostPort: an
// Incus proxy device named device, listening inside n.
func (n *Node) ReachHost(t testing.TB, device string, nodePort, hostPort int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := incus(ctx, "config", "device", "add", n.Name, device, "proxy", "bind=instance",
		fmt.Sprintf("listen=tcp:127.0.0.1:%d", nodePort), fmt.Sprintf("connect=tcp:127.0.0.1:%d", hostPort)); err != nil {
		t.Fatalf("proxy device on %s: %v", n.Name, err)
	}
}

// StrangerHostKey is an ed25519 host key no node has, as "ssh-ed25519 AAAA...".
func StrangerHostKey(t testing.TB) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k)))
}

// JumpFiles writes an ssh config reaching the host alias "target" through jump
// (after ForwardThrough), and a known_hosts file holding jumpKey and targetKey for
// the two hops.
func JumpFiles(t testing.TB, jump *Node, jumpKey, targetKey string) (conf, known string) {
	t.Helper()
	dir := t.TempDir()
	conf = filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("Host target\n  HostName 127.0.0.1\n  Port %d\n  ProxyJump root@127.0.0.1:%d\n",
		JumpTargetPort, jump.SSHPort)), 0o600); err != nil {
		t.Fatal(err)
	}
	known = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%d %s\n[127.0.0.1]:%d %s\n",
		jump.SSHPort, jumpKey, JumpTargetPort, targetKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf, known
}
