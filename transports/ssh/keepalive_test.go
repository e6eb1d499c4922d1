package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/effects"
)

// fakeNode is an in-process SSH server whose connections can be frozen: a frozen
// connection reads nothing more, like a peer that vanished without a reset.
type fakeNode struct {
	l      net.Listener
	signer gossh.Signer

	mu     sync.Mutex
	frozen map[int]chan struct{} // connection index -> closed on thaw
	n      int
}

func newFakeNode(t *testing.T) *fakeNode {
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
	f := &fakeNode{l: l, signer: signer, frozen: map[int]chan struct{}{}}
	t.Cleanup(func() {
		l.Close()
		f.mu.Lock()
		for _, c := range f.frozen {
			close(c)
		}
		f.frozen = map[int]chan struct{}{}
		f.mu.Unlock()
	})
	go f.serve()
	return f
}

func (f *fakeNode) port() int { return f.l.Addr().(*net.TCPAddr).Port }

// freeze stops connection i (0-based, in accept order) from reading.
func (f *fakeNode) freeze(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.frozen[i] = make(chan struct{})
}

func (f *fakeNode) serve() {
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		i := f.n
		f.n++
		f.mu.Unlock()
		go f.handle(&freezable{Conn: c, f: f, i: i})
	}
}

type freezable struct {
	net.Conn
	f *fakeNode
	i int
}

func (c *freezable) Read(p []byte) (int, error) {
	c.f.mu.Lock()
	thaw, frozen := c.f.frozen[c.i]
	c.f.mu.Unlock()
	if frozen {
		<-thaw
	}
	return c.Conn.Read(p)
}

func (f *fakeNode) handle(c net.Conn) {
	defer c.Close()
	cfg := &gossh.ServerConfig{NoClientAuth: true}
	cfg.AddHostKey(f.signer)
	sc, chans, reqs, err := gossh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go gossh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(gossh.UnknownChannelType, "no")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			for r := range creqs {
				if r.Type != "exec" {
					r.Reply(false, nil)
					continue
				}
				r.Reply(true, nil)
				ch.SendRequest("exit-status", false, []byte{0, 0, 0, 0})
				ch.Close()
			}
		}()
	}
}

// A connection that stops answering is found dead by the keepalives and closed, so
// the next Run dials again instead of waiting on it.
func TestKeepaliveDetectsDeadConnection(t *testing.T) {
	f := newFakeNode(t)
	tr, err := New(Config{
		Host: "127.0.0.1", Port: f.port(),
		HostKey:   string(gossh.MarshalAuthorizedKey(f.signer.PublicKey())),
		Keepalive: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	runTrue := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan struct{})
		var code int
		var err error
		go func() {
			code, err = tr.Run(ctx, effects.Command{Argv: []string{"true"}})
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Run hangs on a dead connection")
		}
		if err != nil || code != 0 {
			t.Fatalf("Run: exit %d, %v", code, err)
		}
	}
	runTrue()
	runTrue()
	if n := tr.dials.Load(); n != 1 {
		t.Fatalf("%d dials for two Runs, want 1", n)
	}
	f.freeze(0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		tr.mu.Lock()
		dead := tr.dead
		tr.mu.Unlock()
		select {
		case <-dead:
		default:
			if time.Now().After(deadline) {
				t.Fatal("keepalives did not close the frozen connection")
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		break
	}
	runTrue()
	if n := tr.dials.Load(); n != 2 {
		t.Fatalf("%d dials, want 2 (one redial)", n)
	}
}

// A keepalive whose answer is late is not a dead connection while the node still
// sends: a busy node reads the request only after the data queued before it.
func TestAwaitAnswer(t *testing.T) {
	const every = 20 * time.Millisecond
	never := make(chan struct{})
	cases := []struct {
		name    string
		answer  time.Duration // when the answer comes; 0: never
		err     error
		sending bool // the node sends bytes the whole time
		want    bool
	}{
		{"answered in time", every / 4, nil, false, true},
		{"request failed", every / 4, errors.New("eof"), false, false},
		{"silent node", 0, nil, false, false},
		{"late answer from a node still sending", 6 * every, nil, true, true},
		{"late answer from a silent node", 6 * every, nil, false, false},
		{"answer within the silent intervals allowed", 2 * every, nil, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answered := make(chan error, 1)
			if c.answer > 0 {
				time.AfterFunc(c.answer, func() { answered <- c.err })
			}
			var n atomic.Int64
			stop := make(chan struct{})
			defer close(stop)
			if c.sending {
				go func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(every / 5):
							n.Add(1)
						}
					}
				}()
			}
			if got := awaitAnswer(answered, every, never, n.Load); got != c.want {
				t.Errorf("awaitAnswer = %v, want %v", got, c.want)
			}
		})
	}
}
