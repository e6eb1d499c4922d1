package effects

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFileJournalRoundTrip(t *testing.T) {
	j := FileJournal{Dir: filepath.Join(t.TempDir(), "journal")}
	if e, err := j.Load("web1"); err != nil || e != nil {
		t.Fatalf("no journal yet: %v %v", e, err)
	}
	code := 0
	want := JournalEntry{Phase: JournalSwitch, Toplevel: "/nix/store/a-top", SwitchUnit: "switchyard-switch-1",
		LockToken: 7, Time: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), Host: "ci", PID: 42, Where: "boot/pid:[1]", ExitCode: &code}
	if err := j.Record("web1", want); err != nil {
		t.Fatal(err)
	}
	got, err := j.Load("web1")
	if err != nil || got == nil {
		t.Fatalf("load: %v %v", got, err)
	}
	if got.Phase != want.Phase || got.Toplevel != want.Toplevel || got.SwitchUnit != want.SwitchUnit || got.LockToken != 7 ||
		!got.Time.Equal(want.Time) || got.Host != "ci" || got.PID != 42 || got.Where != want.Where || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Errorf("round trip: got %+v, want %+v", got, want)
	}
	// A second record replaces the first; another node's entry is its own.
	want.Phase = JournalFinalize
	if err := j.Record("web1", want); err != nil {
		t.Fatal(err)
	}
	if got, _ := j.Load("web1"); got == nil || got.Phase != JournalFinalize {
		t.Errorf("after the second record: %+v", got)
	}
	if got, _ := j.Load("web2"); got != nil {
		t.Errorf("web2 has web1's entry: %+v", got)
	}
}

// The write is a rename of a complete, private file: no temporary file is left, the
// file is 0600, the directory 0700, and a file left half-written by someone else is
// replaced whole.
func TestFileJournalAtomicWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j := FileJournal{Dir: dir}
	if err := j.Record("web1", JournalEntry{Phase: JournalPush, Toplevel: "/nix/store/a-top"}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "web1.json")
	if err := os.WriteFile(p, []byte(`{"phase":"swi`), 0o600); err != nil { // a torn write
		t.Fatal(err)
	}
	if err := j.Record("web1", JournalEntry{Phase: JournalSwitch, Toplevel: "/nix/store/a-top"}); err != nil {
		t.Fatal(err)
	}
	if got, err := j.Load("web1"); err != nil || got.Phase != JournalSwitch {
		t.Errorf("after replacing a torn file: %+v %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "web1.json" {
		t.Errorf("files left in the journal: %v", entries)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
		t.Errorf("journal file mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("journal dir mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestFileJournalCorruptNamesFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "web1.json")
	for _, body := range []string{`{"phase":"swi`, `{}`, `not json`} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := FileJournal{Dir: dir}.Load("web1")
		if err == nil || !strings.Contains(err.Error(), p) || !strings.HasPrefix(err.Error(), "journal: ") {
			t.Errorf("%q: error %v, want one naming %s", body, err, p)
		}
	}
	for _, bad := range []string{"", "../x", "a/b", ".."} {
		if _, err := (FileJournal{Dir: dir}).Load(bad); err == nil {
			t.Errorf("node %q: no error", bad)
		}
		if err := (FileJournal{Dir: dir}).Record(bad, JournalEntry{Phase: "push", Toplevel: "/t"}); err == nil {
			t.Errorf("node %q: record wrote a file", bad)
		}
	}
}

func TestDecideRerun(t *testing.T) {
	const top, other, third = "/nix/store/t-top", "/nix/store/o-other", "/nix/store/h-hand"
	at := func(phase, toplevel, unit string) *JournalEntry {
		return &JournalEntry{Phase: phase, Toplevel: toplevel, SwitchUnit: unit, Host: "ci", PID: 9}
	}
	// from is the killed run's switch of top on a node that ran previous then.
	from := func(previous string) *JournalEntry {
		e := at(JournalSwitch, top, "u")
		e.Previous = previous
		return e
	}
	cases := []struct {
		name    string
		e       *JournalEntry
		facts   nodeFacts
		want    rerunAction
		message string
	}{
		{"no journal", nil, nodeFacts{Current: other}, rerunNone, ""},
		{"last run done", at(JournalDone, top, "u"), nodeFacts{Current: top}, rerunNone, ""},
		{"killed in push", at(JournalPush, top, ""), nodeFacts{Current: other}, rerunNone, "killed in push of " + top + "; deploying as usual"},
		{"switch unit still loaded", at(JournalSwitch, top, "u"), nodeFacts{Current: top, UnitState: "loaded"}, rerunAdoptSwitch,
			"killed in switch of " + top + "; its unit u is still on the node: not switching again"},
		{"switch unit loaded, old system still running", at(JournalSwitch, top, "u"), nodeFacts{Current: other, UnitState: "loaded"}, rerunAdoptSwitch, "not switching again"},
		{"switch unit gone, node runs it", at(JournalSwitch, top, "u"), nodeFacts{Current: top, UnitState: "not-found"}, rerunSwitched,
			"its unit u is gone and the node runs " + top + ": the switch completed"},
		{"switch unit gone, node does not run it", at(JournalSwitch, top, "u"), nodeFacts{Current: other, UnitState: "not-found"}, rerunSwitchAgain,
			"its unit u is gone and the node runs " + other + ": switching again"},
		{"switch without a unit name", at(JournalSwitch, top, ""), nodeFacts{Current: other}, rerunSwitchAgain, "switching again"},
		{"finalize cut, node runs it", at(JournalFinalize, top, "u"), nodeFacts{Current: top, UnitState: "not-found"}, rerunFinalize, "finalizing again"},
		{"finalize cut, node runs another", at(JournalFinalize, top, ""), nodeFacts{Current: other}, rerunNone, "the node runs " + other + " now"},
		{"revert cut", at(JournalRevert, top, "u"), nodeFacts{Current: other, UnitState: "not-found"}, rerunNone, "killed in revert"},
		{"switch unit loaded, node on the generation it ran then", from(other), nodeFacts{Current: other, UnitState: "loaded"}, rerunAdoptSwitch, "not switching again"},
		{"switch unit loaded, node runs the toplevel", from(other), nodeFacts{Current: top, UnitState: "loaded"}, rerunAdoptSwitch, "not switching again"},
		{"switch unit loaded, node moved since", from(other), nodeFacts{Current: third, UnitState: "loaded"}, rerunNodeMoved,
			"its unit u is still on the node, but the node runs " + third + " since, neither " + other + " it ran then nor " + top + ": unloading the unit and switching again"},
		{"switch unit gone, node moved since", from(other), nodeFacts{Current: third, UnitState: "not-found"}, rerunSwitchAgain, "switching again"},
		{"another toplevel's switch", at(JournalSwitch, other, "u"), nodeFacts{Current: other, UnitState: "loaded"}, rerunOtherToplevel,
			"killed in switch of " + other + "; deploying " + top + " now"},
	}
	for _, c := range cases {
		got, msg := decideRerun(c.e, top, c.facts)
		if got != c.want || !strings.Contains(msg, c.message) {
			t.Errorf("%s: decideRerun = %d %q, want %d containing %q", c.name, got, msg, c.want, c.message)
		}
		if c.e != nil && c.e.Phase != JournalDone && !strings.HasPrefix(msg, "journal: the last run (deployer host ci, pid 9") {
			t.Errorf("%s: message %q does not say which run", c.name, msg)
		}
	}
}

func TestJournalHolderGone(t *testing.T) {
	me := deployer{Host: "ci", PID: 100, Where: "boot1/pid:[1]"}
	holder := &lockHolder{Token: 5, Host: "ci", PID: 50, Where: "boot1/pid:[1]"}
	entry := func(mod func(e *JournalEntry)) *JournalEntry {
		e := &JournalEntry{Phase: JournalSwitch, Toplevel: "/t", LockToken: 5, Host: "ci", PID: 50, Where: "boot1/pid:[1]"}
		if mod != nil {
			mod(e)
		}
		return e
	}
	dead := func(int) bool { return false }
	alive := func(int) bool { return true }
	cases := []struct {
		name  string
		e     *JournalEntry
		h     *lockHolder
		alive func(int) bool
		want  bool
	}{
		{"its pid ended", entry(nil), holder, dead, true},
		{"its pid lives", entry(nil), holder, alive, false},
		{"the deployer's host rebooted since", entry(func(e *JournalEntry) { e.Where = "boot0/pid:[1]" }), holder, alive, true},
		{"another pid namespace, same boot", entry(func(e *JournalEntry) { e.Where = "boot1/pid:[2]" }), holder, dead, false},
		{"another token", entry(func(e *JournalEntry) { e.LockToken = 4 }), holder, dead, false},
		{"no token journaled", entry(func(e *JournalEntry) { e.LockToken = 0 }), &lockHolder{Host: "ci", PID: 50}, dead, false},
		{"another host's lock", entry(nil), &lockHolder{Token: 5, Host: "laptop", PID: 50}, dead, false},
		{"journal of another host", entry(func(e *JournalEntry) { e.Host = "laptop" }), holder, dead, false},
		{"no place known", entry(func(e *JournalEntry) { e.Where = "-" }), holder, dead, false},
		{"no journal", nil, holder, dead, false},
		{"no lock", entry(nil), nil, dead, false},
	}
	for _, c := range cases {
		if got := journalHolderGone(c.e, c.h, me, c.alive); got != c.want {
			t.Errorf("%s: journalHolderGone = %v, want %v", c.name, got, c.want)
		}
	}
	// decideLock: a holder the journal found gone is not waited for.
	st := lockState{Now: 10, Holder: &lockHolder{Token: 5, Expires: 100, Host: "ci", PID: 50, Where: "boot0/pid:[1]"}, HolderGone: true}
	if got := decideLock(st, me, alive); got != lockAbandoned {
		t.Errorf("decideLock with the journal's holder gone = %d, want lockAbandoned", got)
	}
	st.Running = []string{"switchyard-switch-1"}
	if got := decideLock(st, me, alive); got != lockSwitching {
		t.Errorf("decideLock with the journal's holder gone and its switch running = %d, want lockSwitching", got)
	}
	st.HolderGone, st.Running = false, nil
	if got := decideLock(st, me, alive); got != lockHeld {
		t.Errorf("decideLock without the journal = %d, want lockHeld", got)
	}
}
