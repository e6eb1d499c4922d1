package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/switchyard-nix/switchyard/effects"
)

// fakeJump is an in-process SSH server that only forwards direct-tcpip channels,
// like a bastion. Its connections can be frozen (they read nothing more).
type fakeJump struct {
	l       net.Listener
	signer  gossh.Signer
	accepts atomic.Int64
	frozen  chan struct{} // non-nil while frozen; closed to thaw
	mu      sync.Mutex
	conns   []net.Conn
}

func newFakeJump(t *testing.T) *fakeJump {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	j := &fakeJump{l: l, signer: signer}
	t.Cleanup(func() {
		l.Close()
		j.mu.Lock()
		if j.frozen != nil {
			close(j.frozen)
			j.frozen = nil
		}
		for _, c := range j.conns {
			c.Close()
		}
		j.mu.Unlock()
	})
	go j.serve()
	return j
}

func (j *fakeJump) port() int { return j.l.Addr().(*net.TCPAddr).Port }

func (j *fakeJump) freeze() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.frozen = make(chan struct{})
}

type jumpConn struct {
	net.Conn
	j *fakeJump
}

func (c jumpConn) Read(p []byte) (int, error) {
	c.j.mu.Lock()
	frozen := c.j.frozen
	c.j.mu.Unlock()
	if frozen != nil {
		<-frozen
	}
	return c.Conn.Read(p)
}

func (j *fakeJump) serve() {
	for {
		c, err := j.l.Accept()
		if err != nil {
			return
		}
		j.accepts.Add(1)
		j.mu.Lock()
		j.conns = append(j.conns, c)
		j.mu.Unlock()
		go j.handle(jumpConn{c, j})
	}
}

func (j *fakeJump) handle(c net.Conn) {
	defer c.Close()
	cfg := &gossh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(j.signer)
	sc, chans, reqs, err := gossh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go gossh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "direct-tcpip" {
			nc.Reject(gossh.UnknownChannelType, "forwarding only")
			continue
		}
		var req struct {
			Host       string
			Port       uint32
			OriginHost string
			OriginPort uint32
		}
		if err := gossh.Unmarshal(nc.ExtraData(), &req); err != nil {
			nc.Reject(gossh.ConnectionFailed, "bad request")
			continue
		}
		up, err := net.Dial("tcp", net.JoinHostPort(req.Host, strconv.Itoa(int(req.Port))))
		if err != nil {
			nc.Reject(gossh.ConnectionFailed, err.Error())
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			up.Close()
			continue
		}
		go gossh.DiscardRequests(creqs)
		go func() {
			_, _ = io.Copy(ch, up)
			ch.CloseWrite()
		}()
		go func() {
			_, _ = io.Copy(up, ch)
			up.Close()
		}()
	}
}

func knownLine(t *testing.T, port int, key gossh.PublicKey) string {
	t.Helper()
	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))}, key)
}

// ProxyJump in process: the node reached through a jump host, host keys checked
// on both hops, one TCP connection, the chain closed with the node's connection.
func TestProxyJumpInProcess(t *testing.T) {
	node := newFakeNode(t)
	jump := newFakeJump(t)
	dir := t.TempDir()
	writeKnown := func(name string, jumpKey, nodeKey gossh.PublicKey) string {
		p := filepath.Join(dir, name)
		content := knownLine(t, jump.port(), jumpKey) + "\n" + knownLine(t, node.port(), nodeKey) + "\n"
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := writeKnown("good", jump.signer.PublicKey(), node.signer.PublicKey())
	newTr := func(known string, keepalive time.Duration) *Transport {
		t.Helper()
		tr, err := New(Config{Host: "127.0.0.1", Port: node.port(), SSHConfigFile: NoSSHConfig, KnownHostsFile: known,
			ProxyJump: fmt.Sprintf("root@127.0.0.1:%d", jump.port()), DialTimeout: 5 * time.Second, Keepalive: keepalive})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	runTrue := func(tr *Transport) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		code, err := tr.Run(ctx, effects.Command{Argv: []string{"true"}})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		return err
	}

	tr := newTr(good, 200*time.Millisecond)
	for i := 0; i < 3; i++ {
		if err := runTrue(tr); err != nil {
			t.Fatalf("Run %d through the jump host: %v", i, err)
		}
	}
	if n := tr.dials.Load(); n != 1 {
		t.Errorf("%d dials, want 1", n)
	}
	if n := jump.accepts.Load(); n != 1 {
		t.Errorf("%d TCP connections to the jump host, want 1", n)
	}

	// A jump host that stops answering: the keepalives through it end the chain,
	// and the next Run dials it again.
	jump.freeze()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr.mu.Lock()
		dead := tr.dead
		tr.mu.Unlock()
		select {
		case <-dead:
		default:
			if time.Now().After(deadline) {
				t.Fatal("keepalives did not end the chain through a frozen jump host")
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		break
	}
	jump.mu.Lock()
	close(jump.frozen)
	jump.frozen = nil
	jump.mu.Unlock()
	if err := runTrue(tr); err != nil {
		t.Fatalf("Run after the chain ended: %v", err)
	}
	if n := jump.accepts.Load(); n != 2 {
		t.Errorf("%d TCP connections to the jump host, want 2", n)
	}

	// A wrong key on either hop refuses the node, naming the hop.
	stranger := func() gossh.PublicKey {
		pub, _, _ := ed25519.GenerateKey(rand.Reader)
		k, _ := gossh.NewPublicKey(pub)
		return k
	}
	for name, c := range map[string]struct {
		known string
		names string
	}{
		"jump host": {writeKnown("bad-jump", stranger(), node.signer.PublicKey()), fmt.Sprintf("jump host 127.0.0.1:%d (1 of 1)", jump.port())},
		"node":      {writeKnown("bad-node", jump.signer.PublicKey(), stranger()), fmt.Sprintf("host key of 127.0.0.1:%d ", node.port())},
	} {
		err := runTrue(newTr(c.known, 0))
		if !errors.Is(err, effects.ErrRefused) || !strings.Contains(err.Error(), c.names) {
			t.Errorf("%s key wrong: %v; want ErrRefused naming %q", name, err, c.names)
		}
	}
	// The jump host is not in known_hosts at all.
	only := filepath.Join(dir, "only-node")
	if err := os.WriteFile(only, []byte(knownLine(t, node.port(), node.signer.PublicKey())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := runTrue(newTr(only, 0)); !errors.Is(err, effects.ErrRefused) || !strings.Contains(err.Error(), "jump host") {
		t.Errorf("unknown jump host: %v", err)
	}

	// The jump host cannot reach the node: unreachable, naming the jump host.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	tr2, err := New(Config{Host: "127.0.0.1", Port: closedPort, SSHConfigFile: NoSSHConfig, KnownHostsFile: good,
		ProxyJump: fmt.Sprintf("root@127.0.0.1:%d", jump.port()), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if err := runTrue(tr2); !errors.Is(err, effects.ErrUnreachable) || !strings.Contains(err.Error(), "through jump host") {
		t.Errorf("node behind the jump host down: %v", err)
	}
}
