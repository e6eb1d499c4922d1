package api

import (
	"bytes"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestRecvStreamAfterPeerClosed replays what the daemon did under load on the test
// bed: the command's output, a ping and the close frame, then its end of the unix
// socket closed before the client reads. The pong the client owes cannot be written
// (broken pipe); the output must still arrive whole, with no error.
func TestRecvStreamAfterPeerClosed(t *testing.T) {
	for _, c := range []struct {
		name     string
		tolerant bool
		wantErr  bool
	}{
		{"default ping handler", false, true},
		{"tolerateLatePong", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "s")
			l, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			sent := make(chan struct{})
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
				if err != nil {
					return
				}
				_ = conn.WriteMessage(websocket.BinaryMessage, []byte("all of the output\n"))
				_ = conn.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second))
				_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				conn.Close()
				close(sent)
			})}
			go srv.Serve(l)
			defer srv.Close()

			d := websocket.Dialer{NetDial: func(string, string) (net.Conn, error) { return net.Dial("unix", sock) }}
			conn, _, err := d.Dial("ws://incus/ws", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if c.tolerant {
				tolerateLatePong(conn)
			}
			<-sent
			time.Sleep(50 * time.Millisecond) // the server's end is gone before we read
			var out bytes.Buffer
			err = recvStream(conn, &out)
			if c.wantErr {
				// The premise: without the handler the pong's write error ends the read.
				if err == nil || !strings.Contains(err.Error(), "broken pipe") {
					t.Fatalf("recvStream with the default ping handler: %v, want a broken pipe (the premise of this test)", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("recvStream: %v", err)
			}
			if out.String() != "all of the output\n" {
				t.Errorf("output %q", out.String())
			}
		})
	}
}
