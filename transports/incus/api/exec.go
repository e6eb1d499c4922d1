package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ExecRequest is the body of POST /1.0/instances/<name>/exec. Exec sets the
// stream fields itself (websockets, not interactive, output not recorded).
type ExecRequest struct {
	Command      []string          `json:"command"`
	Environment  map[string]string `json:"environment,omitempty"`
	WaitForWS    bool              `json:"wait-for-websocket"`
	Interactive  bool              `json:"interactive"`
	RecordOutput bool              `json:"record-output"`
}

// execMetadata is the metadata of an exec operation: the websocket secrets
// while it runs, the exit status once it has ended.
type execMetadata struct {
	FDs    map[string]string `json:"fds"`
	Return *int              `json:"return"`
}

// execControl is a message on an exec's control websocket.
type execControl struct {
	Command string `json:"command"`
	Signal  int    `json:"signal,omitempty"`
}

// Timing of an exec's end; variables for tests.
var (
	// cancelGrace is how long a cancelled command has between SIGTERM and the
	// close of its websockets (which makes the daemon kill it).
	cancelGrace = 2 * time.Second
	// drainGrace is how long the output streams may run on after the
	// operation has ended (a background process of the command may hold them).
	drainGrace = 5 * time.Second
)

// ErrExecCancelled is what Exec returns (with ctx.Err()) when ctx ends before
// the command.
var ErrExecCancelled = errors.New("interrupted")

// Exec runs req.Command on instance with the websocket streams of a
// non-interactive exec: stdin (nil: empty) is sent and then closed, stdout and
// stderr (nil: discarded) get what the command writes, and its exit status is
// returned. A cancelled ctx signals the command (SIGTERM), then closes the
// streams, which makes the daemon kill it; Exec then returns ErrExecCancelled
// wrapped with ctx.Err(). A program the daemon cannot find is an *Error whose
// message IsCommandNotFound tells.
func (c *Client) Exec(ctx context.Context, instance, project string, req ExecRequest,
	stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	req.WaitForWS, req.Interactive, req.RecordOutput = true, false, false
	op, err := c.postAsync(ctx, withProject("/1.0/instances/"+url.PathEscape(instance)+"/exec", project), req)
	if err != nil {
		return -1, err
	}
	var meta execMetadata
	if err := json.Unmarshal(op.Metadata, &meta); err != nil {
		return -1, fmt.Errorf("incus API: exec operation metadata not understood: %w", err)
	}
	names := []string{"control", "0", "1", "2"}
	conns := make(map[string]*websocket.Conn, len(names))
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	for _, n := range names {
		secret := meta.FDs[n]
		if secret == "" {
			closeAll()
			return -1, fmt.Errorf("incus API: exec operation has no websocket %q", n)
		}
		conn, err := c.websocket(ctx, op.ID, secret)
		if err != nil {
			closeAll()
			return -1, err
		}
		tolerateLatePong(conn)
		conns[n] = conn
	}
	defer closeAll()

	// The operation's end: waited for apart from ctx, so that a cancelled
	// command can still be seen ending.
	waitCtx, stopWait := context.WithCancel(context.Background())
	defer stopWait()
	type ended struct {
		op  *operation
		err error
	}
	opDone := make(chan ended, 1)
	go func() {
		o, err := c.wait(waitCtx, op.ID)
		opDone <- ended{o, err}
	}()

	// The control stream: its messages are read (and dropped) so that the
	// websocket's own close and ping frames are answered.
	go func() {
		for {
			if _, _, err := conns["control"].NextReader(); err != nil {
				return
			}
		}
	}()
	go sendStream(conns["0"], stdin)
	var outputs sync.WaitGroup
	outErrs := make([]error, 2)
	for i, w := range []io.Writer{stdout, stderr} {
		outputs.Add(1)
		go func() {
			defer outputs.Done()
			outErrs[i] = recvStream(conns[names[i+2]], w)
		}()
	}
	outDone := make(chan struct{})
	go func() { outputs.Wait(); close(outDone) }()

	var res ended
	select {
	case res = <-opDone:
	case <-ctx.Done():
		sig, _ := json.Marshal(execControl{Command: "signal", Signal: 15})
		_ = conns["control"].WriteMessage(websocket.TextMessage, sig)
		select {
		case <-opDone:
		case <-time.After(cancelGrace):
		}
		return -1, fmt.Errorf("%w: %w", ErrExecCancelled, ctx.Err())
	}
	// The output ends when the daemon closes its streams, right after the
	// operation; a stream a leftover process holds open is cut off.
	cut := false
	select {
	case <-outDone:
	case <-time.After(drainGrace):
		cut = true
	case <-ctx.Done():
		cut = true
	}
	if cut {
		closeAll()
		<-outDone
	}
	if res.err != nil {
		return -1, res.err
	}
	var final execMetadata
	_ = json.Unmarshal(res.op.Metadata, &final)
	if res.op.StatusCode != statusSuccess || final.Return == nil {
		msg := res.op.Err
		if msg == "" {
			msg = "status " + res.op.Status
		}
		if final.Return != nil {
			return *final.Return, nil
		}
		if IsCommandNotFound(res.op.Err) {
			return -1, &Error{Code: statusFailure, Msg: res.op.Err}
		}
		return -1, fmt.Errorf("incus API: exec of %s ended without an exit status: %s", req.Command[0], msg)
	}
	for _, err := range outErrs {
		if err != nil && !cut {
			return -1, &DialError{fmt.Errorf("output of %s cut off: %w", req.Command[0], err)}
		}
	}
	return *final.Return, nil
}

// tolerateLatePong makes a pong that cannot be written no error of the reader. The
// daemon may ping a stream and close its end right after the command's last output:
// gorilla's default ping handler then returns the failed pong's "broken pipe" from
// NextReader, before the close frame and any output still buffered are read, and a
// complete output looked cut off. The pong is a courtesy; a connection that really
// broke still fails the next read.
func tolerateLatePong(conn *websocket.Conn) {
	conn.SetPingHandler(func(msg string) error {
		_ = conn.WriteControl(websocket.PongMessage, []byte(msg), time.Now().Add(time.Second))
		return nil
	})
}

// sendStream sends r (nil: nothing) on conn as binary messages, then the empty
// text message that ends the stream on the daemon's side.
func sendStream(conn *websocket.Conn, r io.Reader) {
	if r != nil {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if werr := conn.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				break
			}
		}
	}
	_ = conn.WriteMessage(websocket.TextMessage, []byte{})
}

// recvStream writes the binary messages of conn to w (nil: discarded) until the
// stream ends: an empty text message or the websocket's close. An error is
// returned only when the stream broke off.
func recvStream(conn *websocket.Conn, w io.Writer) error {
	if w == nil {
		w = io.Discard
	}
	for {
		mt, r, err := conn.NextReader()
		switch {
		case err == nil:
		case websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived):
			return nil
		default:
			return err
		}
		if mt == websocket.TextMessage {
			return nil
		}
		if _, err := io.Copy(w, r); err != nil {
			// The caller stopped taking output: drop the rest.
			w = io.Discard
		}
	}
}

// IsCommandNotFound tells whether a message of the daemon says that the
// command's program was not found on the instance.
func IsCommandNotFound(msg string) bool {
	return strings.Contains(strings.ToLower(msg), "command not found")
}
