package provider

import (
	"encoding/json"
	"net"
	"sync"
	"sync/atomic"

	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/redact"
)

// bodyLogs is where the deploy bodies' log lines go besides the provider log: the
// CLI's socket of the run this process serves (one run a process, newSession). nil:
// none.
var bodyLogs atomic.Pointer[relay]

// relay sends log lines to the CLI's socket (contract.Run.LogSocket), dialled at the
// first line: a run that deploys nothing never connects. A socket that cannot be
// reached or written drops the lines after it; they stay in the provider log.
type relay struct {
	dial func() (net.Conn, error)
	once sync.Once
	mu   sync.Mutex
	enc  *json.Encoder // nil: not connected
	conn net.Conn
}

// newRelay is the relay to the unix socket path; nil for "".
func newRelay(path string) *relay {
	if path == "" {
		return nil
	}
	return &relay{dial: func() (net.Conn, error) { return net.Dial("unix", path) }}
}

// send writes one line, redacted as every diagnostic is (SPEC 6.9). Bodies of
// several nodes run at once: a line is written whole.
func (r *relay) send(l contract.LogLine) {
	if r == nil {
		return
	}
	r.once.Do(func() {
		if c, err := r.dial(); err == nil {
			r.conn, r.enc = c, json.NewEncoder(c)
		}
	})
	l.Msg = redact.Default.String(l.Msg)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.enc == nil {
		return
	}
	if err := r.enc.Encode(l); err != nil {
		r.conn.Close()
		r.enc = nil
	}
}
