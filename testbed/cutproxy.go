package testbed

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// CutProxy forwards a 127.0.0.1 port to a node's sshd and can sever every live
// connection on demand: the test's stand-in for a network that drops the deployer's
// SSH connections mid-phase (a Wi-Fi roam, a NAT timeout, a VPN restart). New
// connections are accepted again right after a cut, as after such an outage.
type CutProxy struct {
	Port int // the 127.0.0.1 port to connect to instead of the node's

	ln     net.Listener
	target string
	mu     sync.Mutex
	live   map[net.Conn]struct{}
	cuts   int
	seen   int // connections accepted
	closed bool
}

// Cut forwards to node's sshd through a new proxy, closed when t ends.
func Cut(t testing.TB, node *Node) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("cut proxy: %v", err)
	}
	p := &CutProxy{Port: ln.Addr().(*net.TCPAddr).Port, ln: ln,
		target: net.JoinHostPort("127.0.0.1", strconv.Itoa(node.SSHPort)), live: map[net.Conn]struct{}{}}
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

func (p *CutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.seen++
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *CutProxy) forward(client net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var d net.Dialer
	server, err := d.DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		// One direction ended: end both, as a real connection would.
		dst.Close()
		src.Close()
	}
	go pipe(server, client)
	go pipe(client, server)
	wg.Wait()
	p.mu.Lock()
	delete(p.live, client)
	delete(p.live, server)
	p.mu.Unlock()
}

// track registers a forwarded pair; false (both closed) once the proxy is closed.
func (p *CutProxy) track(a, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		a.Close()
		b.Close()
		return false
	}
	p.live[a], p.live[b] = struct{}{}, struct{}{}
	return true
}

// Cut severs every live connection (both of its halves) at once and returns how
// many forwarded connections it cut.
func (p *CutProxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.live {
		// A reset, not an orderly close: the peer sees the connection die.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	n := len(p.live) / 2
	p.live = map[net.Conn]struct{}{}
	p.cuts++
	return n
}

// Live is the number of forwarded connections open now.
func (p *CutProxy) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live) / 2
}

// Accepted is the number of connections the proxy accepted so far: a test that a run
// refused before contacting the node sees 0.
func (p *CutProxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

// Close stops accepting and cuts what is live.
func (p *CutProxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.Cut()
}

func (p *CutProxy) String() string {
	return fmt.Sprintf("cut proxy 127.0.0.1:%d -> %s", p.Port, p.target)
}
