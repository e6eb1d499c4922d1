package api_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// peekingListener accepts as incusd's unix socket does (Incus 6.0's
// StarttlsListener): Accept reads a connection's first bytes before it returns it,
// so while one accepted connection stays silent nobody else is accepted.
type peekingListener struct {
	net.Listener
	open atomic.Int64 // connections accepted and not yet closed
}

func (l *peekingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	r := bufio.NewReader(c)
	_, _ = r.Peek(8) // blocks while the client says nothing
	return &peekedConn{Conn: c, r: r, l: l}, nil
}

type peekedConn struct {
	net.Conn
	r    *bufio.Reader
	l    *peekingListener
	once sync.Once
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *peekedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// The client leaves no connection open to the daemon's unix socket once its
// requests are answered. A connection left idle (net/http keeps the one it dialed
// for a request another connection served, never used) stops incusd 6.0 from
// accepting anyone else: the whole host's Incus hung in CI that way, with the
// testbed's client holding one such connection while tf-incus-operator created a
// project. The answer is the daemon's own, recorded from the test bed.
func TestNoConnectionLeftOpen(t *testing.T) {
	answer, err := os.ReadFile("testdata/project-default.json")
	if err != nil {
		t.Fatal(err)
	}
	var l *peekingListener
	c := serveUnix(t, func(ul net.Listener) net.Listener { l = &peekingListener{Listener: ul}; return l },
		func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Millisecond) // long enough for requests to overlap
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(answer)
		})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 128)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				p, err := c.Project(ctx, "default")
				if err == nil && p.Name != "default" {
					t.Errorf("project %q, want default", p.Name)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a request failed (the accept loop was stopped by a silent connection?): %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.open.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := l.open.Load(); n > 0 {
		t.Errorf("%d connections left open to the daemon after every answer: a silent one stops incusd 6.0 accepting", n)
	}
}

// A file read that meets the files API's helper as it stops (HTTP 500, the answer
// recorded in CI from incusd 6.0.4) is asked again and succeeds; a missing file (404)
// is not asked again.
func TestFileReadRetriedAfterServerError(t *testing.T) {
	reset, err := os.ReadFile("testdata/forkfile-reset.json")
	if err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int64
	c := serveUnix(t, nil, func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		switch {
		case r.URL.Query().Get("path") == "/missing":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"error","error_code":404,"error":"Not Found"}`))
		case n == 1:
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write(reset)
		default:
			h := w.Header()
			h.Set("X-Incus-type", "file")
			h.Set("X-Incus-uid", "0")
			h.Set("X-Incus-gid", "0")
			h.Set("X-Incus-mode", "0600")
			_, _ = w.Write([]byte("token"))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := c.File(ctx, "default", "web1", "/var/lib/switchyard/spire/join-token")
	if err != nil || string(f.Content) != "token" || requests.Load() != 2 {
		t.Fatalf("read after a 500: %+v, %v, %d requests; want the file after 2", f, err, requests.Load())
	}
	requests.Store(10)
	if _, err := c.Stat(ctx, "default", "web1", "/missing"); !api.IsNotFound(err) || requests.Load() != 11 {
		t.Errorf("missing file: %v after %d requests; want not found after 1", err, requests.Load()-10)
	}
}

// serveUnix serves handler on a unix socket of its own (its listener wrapped by wrap
// when not nil) until t ends, and is a client of it.
func serveUnix(t *testing.T, wrap func(net.Listener) net.Listener, handler http.HandlerFunc) *api.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "unix.socket")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		l = wrap(l)
	}
	srv := &http.Server{Handler: handler}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := api.New(sock)
	t.Cleanup(c.Close)
	return c
}
