package methods

import (
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/effects/effectstest"
)

// The provider's body log lines become the run's log events, whole and in order per
// connection; closeWait reads a connection that ended before it, and a line that is
// not a LogLine ends only its own connection.
func TestBodyLogs(t *testing.T) {
	var out effectstest.Events
	l, err := listenBodyLogs(&out)
	if err != nil {
		t.Fatal(err)
	}
	send := func(lines ...string) {
		c, err := net.Dial("unix", l.path())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// One write: the reader may end the connection at a bad line.
		if _, err := c.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"node":"web1","level":"info","msg":"web1: push: 2 paths in the closure, 2 missing, 0 sent (416 bytes), 2 from the node's caches"}`,
		`{"node":"web1","level":"debug","msg":"web1: switch: starting the following units: a.service"}`)
	send(`not json`, `{"node":"web2","level":"info","msg":"after garbage"}`)
	send(`{"node":"web2","level":"warn","msg":"web2: deploy lock: renewing it: x (retrying)"}`)
	l.closeWait()
	l.closeWait() // once
	got := out.Logs()
	slices.Sort(got)
	want := []string{
		"info web1: push: 2 paths in the closure, 2 missing, 0 sent (416 bytes), 2 from the node's caches",
		"info web1: switch: starting the following units: a.service",
		"warn web2: deploy lock: renewing it: x (retrying)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("logs %q, want %q", got, want)
	}
	if _, err := net.Dial("unix", l.path()); err == nil {
		t.Error("the socket still accepts after closeWait")
	}
	var none *bodyLogs
	none.closeWait() // a run without one
}
