package ssh_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/ssh"
	"github.com/switchyard-nix/switchyard/transports/transporttest"
)

// TestNodeAnswerBounds runs SPEC 6.9's bounds on a node's answers over SSH: a
// readlink answering 200 MB, and one that never answers.
func TestNodeAnswerBounds(t *testing.T) {
	transporttest.Bounds(t, func(t *testing.T, node *testbed.Node, commandTimeout time.Duration) effects.Transport {
		return nodeTransport(t, node, func(c *ssh.Config) {
			c.SSHConfigFile = ssh.NoSSHConfig
			c.CommandTimeout = commandTimeout
		})
	})
}

// freezeProxy forwards a loopback port to a node's sshd. Freeze makes every
// connection open at the time silent: kept open, passing nothing either way, a
// node (or a network) that took the connection and never answers again. Later
// connections are forwarded.
type freezeProxy struct {
	port   int
	mu     sync.Mutex
	frozen chan struct{} // closed by Freeze for the connections made before it
}

func newFreezeProxy(t *testing.T, node *testbed.Node) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{port: ln.Addr().(*net.TCPAddr).Port, frozen: make(chan struct{})}
	var conns []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	pipe := func(dst, src net.Conn, frozen chan struct{}) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case <-frozen:
					return // silent from here on; the connections stay open
				default:
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(node.SSHPort)))
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			p.mu.Lock()
			frozen := p.frozen
			p.mu.Unlock()
			go pipe(s, c, frozen)
			go pipe(c, s, frozen)
		}
	}()
	return p
}

func (p *freezeProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.frozen)
	p.frozen = make(chan struct{})
}

// A connection that goes silent after connect (no keepalive to notice it within
// the test) cannot stall a command past its deadline: Run ends with an error
// naming the deadline, within it plus the cancel's grace, and the next Run dials
// anew rather than waiting on the dead connection again.
func TestNodeSilentConnection(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	proxy := newFreezeProxy(t, node)
	const deadline = 2 * time.Second
	tr := nodeTransport(t, node, func(c *ssh.Config) {
		c.SSHConfigFile = ssh.NoSSHConfig
		c.Port = proxy.port
		c.HostKey = node.HostKey
		c.CommandTimeout = deadline
		c.Keepalive = time.Hour
	})
	if code, _ := run(t, tr, effects.Command{Argv: []string{"true"}}); code != 0 {
		t.Fatalf("true exited %d", code)
	}
	proxy.Freeze()
	ctx := ctxFor(t, 30*time.Second)
	start := time.Now()
	code, err := tr.Run(ctx, effects.Command{Argv: []string{"readlink", "-f", "/run/current-system"}, Stdout: &bytes.Buffer{}})
	took := time.Since(start)
	t.Logf("Run on the silent connection: %d, %v after %v", code, err, took.Round(time.Millisecond))
	switch {
	case err == nil:
		t.Fatalf("Run = %d, nil; want an error", code)
	case ctx.Err() != nil:
		t.Errorf("Run ended only with the test's own bound: %v; want the command's deadline of %v", err, deadline)
	case !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "deadline"):
		t.Errorf("Run: %v; want an error naming the command's deadline", err)
	}
	// The deadline, then at most the cancel's steps (pid, SIGTERM, SIGKILL).
	if took > deadline+10*time.Second {
		t.Errorf("Run took %v; want within %v plus the cancel's grace", took.Round(time.Millisecond), deadline)
	}
	dials := ssh.Dials(tr)
	var out bytes.Buffer
	if code, err := tr.Run(ctxFor(t, 30*time.Second), effects.Command{Argv: []string{"echo", "ok"}, Stdout: &out}); err != nil || code != 0 || out.String() != "ok\n" {
		t.Errorf("echo ok after the silent connection: %d, %v, %q", code, err, out.String())
	}
	if ssh.Dials(tr) != dials+1 {
		t.Errorf("%d dials after the silent connection, want 1", ssh.Dials(tr)-dials)
	}
}

// A copy to a node that took the connection and never answers again ends once no
// byte has moved for Config.CopyIdle, with an error naming that bound, rather than
// waiting as long as the caller does; the next command dials anew.
func TestNodeSilentCopy(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	top := bed.Build(t, "healthy", "silent-copy")
	proxy := newFreezeProxy(t, node)
	const idle = 2 * time.Second
	tr := nodeTransport(t, node, func(c *ssh.Config) {
		c.SSHConfigFile = ssh.NoSSHConfig
		c.Port = proxy.port
		c.HostKey = node.HostKey
		c.CopyIdle = idle
		c.Keepalive = time.Hour
	})
	if code, _ := run(t, tr, effects.Command{Argv: []string{"true"}}); code != 0 {
		t.Fatalf("true exited %d", code)
	}
	proxy.Freeze()
	ctx := ctxFor(t, 30*time.Second)
	start := time.Now()
	err := tr.CopyClosure(ctx, []string{top})
	took := time.Since(start)
	t.Logf("copy on the silent connection: %v after %v", err, took.Round(time.Millisecond))
	switch {
	case err == nil:
		t.Fatal("the copy succeeded on a silent connection")
	case ctx.Err() != nil:
		t.Errorf("the copy ended only with the test's own bound: %v; want its idle bound of %v", err, idle)
	case !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no byte moved"):
		t.Errorf("copy: %v; want an error naming its idle bound", err)
	}
	if took > idle+10*time.Second {
		t.Errorf("the copy took %v; want within its idle bound %v plus the cancel's grace", took.Round(time.Millisecond), idle)
	}
	var out bytes.Buffer
	if code, err := tr.Run(ctxFor(t, 30*time.Second), effects.Command{Argv: []string{"echo", "ok"}, Stdout: &out}); err != nil || code != 0 || out.String() != "ok\n" {
		t.Errorf("echo ok after the silent copy: %d, %v, %q", code, err, out.String())
	}
}
