package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// lateCloseDaemon is an Incus daemon on a unix socket that answers every exec the way
// incusd did under load when the incus CLI returned an empty stdout: the command's
// output, then a ping and the close frame on the stdout websocket, and its end of the
// socket closed before the client has read them. The command's exit status and
// stderr are given; its stdout is out.
type lateCloseDaemon struct {
	out, stderr string
	code        int

	mu      sync.Mutex
	argv    []string
	streams sync.WaitGroup // the output websockets, done when written and closed
}

func (d *lateCloseDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(v map[string]any) { _ = json.NewEncoder(w).Encode(v) }
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/exec"):
		var req api.ExecRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		d.mu.Lock()
		d.argv = req.Command
		d.mu.Unlock()
		d.streams.Add(2)
		w.WriteHeader(http.StatusAccepted)
		reply(map[string]any{"type": "async", "status_code": 100, "operation": "/1.0/operations/op",
			"metadata": map[string]any{"id": "op", "status_code": 103,
				"metadata": map[string]any{"fds": map[string]string{"control": "c", "0": "0", "1": "1", "2": "2"}}}})
	case strings.HasSuffix(r.URL.Path, "/websocket"):
		conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		switch r.URL.Query().Get("secret") {
		case "1":
			defer d.streams.Done()
			_ = conn.WriteMessage(websocket.BinaryMessage, []byte(d.out))
			_ = conn.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second))
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			conn.Close()
		case "2":
			defer d.streams.Done()
			_ = conn.WriteMessage(websocket.BinaryMessage, []byte(d.stderr))
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			conn.Close()
		default: // stdin and control: read until the client is done with them
			for {
				if _, _, err := conn.NextReader(); err != nil {
					conn.Close()
					return
				}
			}
		}
	case strings.HasSuffix(r.URL.Path, "/wait"):
		d.streams.Wait()
		// The client reads the output after the operation's end: give the closed
		// stdout stream time to be gone on its side, as under load.
		time.Sleep(50 * time.Millisecond)
		reply(map[string]any{"type": "sync", "status_code": 200, "metadata": map[string]any{"id": "op",
			"status": "Success", "status_code": 200, "metadata": map[string]any{"return": d.code}}})
	default:
		w.WriteHeader(http.StatusNotFound)
		reply(map[string]any{"type": "error", "error_code": 404, "error": "not found"})
	}
}

// fakeNode is a node named name whose Exec goes to daemon on a unix socket.
func fakeNode(t *testing.T, name string, daemon http.Handler) *Node {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "unix.socket")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: daemon}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &Node{Name: name, bed: &Bed{api: api.New(sock)}}
}

// Node.Exec gets the whole stdout of a command whose output stream the daemon closed
// before the client read it (the incus CLI then returned ""), its argv unchanged,
// and a non-zero exit as an *ExitError with the command's stderr.
func TestExecOutputAfterLateClose(t *testing.T) {
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4inzM5jOx8xxmjhITtKFD7q0B50Pu07HOHGjAEY+JB root@node\n"
	d := &lateCloseDaemon{out: key}
	n := fakeNode(t, "node1", d)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	argv := []string{"cat", "/etc/ssh/ssh_host_ed25519_key.pub", "it's; $(not a shell)"}
	out, err := n.Exec(ctx, argv...)
	if err != nil || out != key {
		t.Fatalf("Exec: %q, %v; want %q", out, err, key)
	}
	if got := strings.Join(d.argv, "\x00"); got != strings.Join(argv, "\x00") {
		t.Errorf("the daemon ran %q, want %q", d.argv, argv)
	}

	d = &lateCloseDaemon{out: "partial\n", stderr: "readlink: bad\n", code: 3}
	n = fakeNode(t, "node2", d)
	out, err = n.Exec(ctx, "readlink", "-e", "/x")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || ee.Stderr != "readlink: bad" || ee.Node != "node2" || out != "partial\n" {
		t.Fatalf("Exec of a failing command: %q, %v; want stdout %q and exit 3 with its stderr", out, err, "partial\n")
	}
}

// Node.Exec on a real node: stdout, a non-zero exit with its stderr, a missing link
// read as "", and many commands at once each with its whole output (the incus CLI
// under load returned an empty stdout for some).
func TestNodeExec(t *testing.T) {
	bed := Require(t)
	t.Parallel()
	n := bed.Node(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := n.Exec(ctx, "sh", "-c", `echo "$1"; echo oops >&2; exit 3`, "sh", "it's; $(not run)")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || ee.Stderr != "oops" || out != "it's; $(not run)\n" {
		t.Errorf("Exec: %q, %v; want the argument echoed, exit 3 and stderr oops", out, err)
	}
	if got := n.Readlink(t, "/nonexistent"); got != "" {
		t.Errorf("Readlink of a missing link: %q", got)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 48)
	for range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := n.Exec(ctx, "cat", "/etc/ssh/ssh_host_ed25519_key.pub")
			if err != nil || !strings.HasPrefix(out, n.HostKey+" ") {
				errs <- fmt.Errorf("host key read as %q (%v), want %s", out, err, n.HostKey)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkCPUParts(ctx, t, n)
}

// checkCPUParts: CPU burnt by a command over ssh counts in the node's sshd part, and
// CPU burnt by one run through incus exec does not (it counts in the rest).
func checkCPUParts(ctx context.Context, t *testing.T, n *Node) {
	const burn = `i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done`
	read := func() CPUParts {
		p, ok := InstanceCPUParts(n.Name)
		if !ok {
			t.Fatalf("InstanceCPUParts(%s): not read", n.Name)
		}
		return p
	}
	before := read()
	if _, err := n.SSH(ctx, "sh", "-c", burn); err != nil {
		t.Fatal(err)
	}
	overSSH := read().Sub(before)
	if _, err := n.Exec(ctx, "sh", "-c", burn); err != nil {
		t.Fatal(err)
	}
	overExec := read().Sub(before).Sub(overSSH)
	if overSSH.SSH < 100*time.Millisecond || overSSH.SSH < overSSH.All*8/10 || overSSH.PID1 > overSSH.SSH/4 {
		t.Errorf("a loop run over ssh: %+v; want most of the container's CPU in sshd's part, at least 100ms", overSSH)
	}
	if overExec.Rest() < 100*time.Millisecond || overExec.SSH > overExec.All/10 {
		t.Errorf("a loop run by incus exec: %+v; want it in the rest, not in sshd's part", overExec)
	}
}
