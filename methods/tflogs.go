package methods

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/provider/contract"
)

// bodyLogs receives the deploy bodies' log lines from the provider OpenTofu runs
// (contract.Run.LogSocket) and reports them as the run's log events, as the ssh
// method reports its bodies': the push line, the switch's messages. OpenTofu's own
// output carries no provider log.
type bodyLogs struct {
	dir     string
	ln      net.Listener
	out     Reporter
	readers sync.WaitGroup
	accept  chan struct{} // closed when the accept loop ended
	once    sync.Once

	mu    sync.Mutex
	conns []net.Conn
}

// listenBodyLogs listens on a socket in a new directory of its own (mode 0700: only
// this user's processes connect).
func listenBodyLogs(out Reporter) (*bodyLogs, error) {
	dir, err := os.MkdirTemp("", "switchyard-logs-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	l := &bodyLogs{dir: dir, ln: ln, out: out, accept: make(chan struct{})}
	go l.serve()
	return l, nil
}

// path is the socket's, for contract.Run.LogSocket.
func (l *bodyLogs) path() string { return l.ln.Addr().String() }

func (l *bodyLogs) serve() {
	defer close(l.accept)
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
		l.readers.Add(1)
		go l.read(c)
	}
}

// read reports each line of one provider process until it exits; a line too long
// or not a LogLine ends the connection.
func (l *bodyLogs) read(c net.Conn) {
	defer l.readers.Done()
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line contract.LogLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return
		}
		switch line.Level {
		case "error", "warn", "info":
		default:
			line.Level = "info"
		}
		l.out.Log(line.Node, line.Level, line.Msg)
	}
}

// closeWait is called once OpenTofu has exited, so have its providers: it takes the
// connections still queued (a provider that connected and ended at once), reads every
// connection to its end, then removes the socket. Bounded: a connection still open
// after a few seconds belongs to no OpenTofu of this run: it is closed, so that no
// line follows the run's last events. nil: nothing.
func (l *bodyLogs) closeWait() {
	if l == nil {
		return
	}
	l.once.Do(func() {
		if ul, ok := l.ln.(*net.UnixListener); ok {
			ul.SetDeadline(time.Now().Add(200 * time.Millisecond))
		} else {
			l.ln.Close()
		}
		<-l.accept
		l.ln.Close()
		done := make(chan struct{})
		go func() { l.readers.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			l.mu.Lock()
			for _, c := range l.conns {
				c.Close()
			}
			l.mu.Unlock()
			<-done
		}
		os.RemoveAll(l.dir)
	})
}
