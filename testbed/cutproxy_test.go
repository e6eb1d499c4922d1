package testbed

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// A cut resets the live connections through the proxy, both ways, and the proxy
// takes new ones afterwards.
func TestCutProxyCutsAndAcceptsAgain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	p := Cut(t, &Node{SSHPort: ln.Addr().(*net.TCPAddr).Port})

	echo := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)))
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		if _, err := c.Write([]byte("ping\n")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
			t.Fatalf("echo through the proxy: %q, %v", line, err)
		}
		return c, r
	}
	c, r := echo()
	defer c.Close()
	if n := p.Live(); n != 1 {
		t.Fatalf("live connections %d, want 1", n)
	}
	if n := p.Cut(); n != 1 {
		t.Fatalf("cut %d connections, want 1", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the cut connection still reads")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the cut connection hangs instead of ending")
	}
	c2, _ := echo()
	c2.Close()
}
