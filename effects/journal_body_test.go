package effects_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/verdict"
)

func journaled(t *testing.T, tr effects.Transport, top string, j effects.Journal) (effects.Result, *effectstest.Events) {
	t.Helper()
	ev := &effectstest.Events{}
	d := (&effects.Deploy{Node: "web1", Transport: tr, Config: testConfig(false), Reporter: ev, SkipUnchanged: true, Journal: j,
		Source: effects.Source{Toplevel: top}}).WithSeams(func(context.Context, effects.Source) (string, error) { return top, nil }, time.Millisecond)
	return d.Run(context.Background()), ev
}

func logged(ev *effectstest.Events, substr string) bool {
	for _, l := range ev.Logs() {
		if strings.Contains(l, substr) {
			return true
		}
	}
	return false
}

// A run killed in its switch left the unit's name: the rerun reads that unit's
// result as its switch's, starts no switch, unloads the unit, finalizes, and marks
// the journal done.
func TestRerunAdoptsTheKilledSwitch(t *testing.T) {
	f := effectstest.Load(t, "healthy") // the snapshot finds the toplevel running
	f.Current = f.Toplevel
	j := effects.FileJournal{Dir: t.TempDir()}
	if err := j.Record("web1", effects.JournalEntry{Phase: effects.JournalSwitch, Toplevel: f.Toplevel, SwitchUnit: "switchyard-switch-17"}); err != nil {
		t.Fatal(err)
	}
	res, ev := journaled(t, f, f.Toplevel, j)
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchOK || res.Verdict.BootEntry != f.Toplevel {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if f.Did("run systemd-run") != 0 || f.Did("run systemctl show --property=LoadState,ActiveState,Result,ExecMainCode,ExecMainStatus -- switchyard-switch-17") == 0 ||
		f.Did("run systemctl stop -- switchyard-switch-17") != 1 || f.Did("finalize "+f.Toplevel) != 1 {
		t.Errorf("want the killed run's unit read and unloaded, no new switch, one finalize: %v", f.Log())
	}
	if !logged(ev, "journal: the last run") || !logged(ev, "its unit switchyard-switch-17 is still on the node: not switching again") ||
		!strings.Contains(res.Journal, "not switching again") {
		t.Errorf("no journal line: %q (result: %q)", ev.Logs(), res.Journal)
	}
	if e, err := j.Load("web1"); err != nil || e == nil || e.Phase != effects.JournalDone || e.ExitCode == nil || *e.ExitCode != 0 {
		t.Errorf("journal after the rerun: %+v %v", e, err)
	}
}

// The killed run's unit is gone and the node runs the toplevel: the switch
// completed; no switch, finalize runs even though profile and boot entry look set.
func TestRerunAfterACompletedSwitchFinalizes(t *testing.T) {
	f := gone{effectstest.Load(t, "healthy")}
	j := effects.FileJournal{Dir: t.TempDir()}
	if err := j.Record("web1", effects.JournalEntry{Phase: effects.JournalSwitch, Toplevel: f.Toplevel, SwitchUnit: "switchyard-switch-17"}); err != nil {
		t.Fatal(err)
	}
	res, ev := journaled(t, f, f.Toplevel, j)
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchUnchanged || res.Verdict.BootEntry != f.Toplevel {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if f.Did("run systemd-run") != 0 || f.Did("finalize "+f.Toplevel) != 1 {
		t.Errorf("want no switch and one finalize: %v", f.Log())
	}
	if !logged(ev, "is gone and the node runs "+f.Toplevel+": the switch completed; not switching again") {
		t.Errorf("no journal line: %q", ev.Logs())
	}
}

// Finalize was cut: the rerun finalizes again although the profile and the boot
// entry read right (a cut write can leave them so); without the journal it would not.
func TestRerunFinishesACutFinalize(t *testing.T) {
	f := effectstest.Load(t, "healthy") // profile and boot entry name the toplevel
	j := effects.FileJournal{Dir: t.TempDir()}
	if err := j.Record("web1", effects.JournalEntry{Phase: effects.JournalFinalize, Toplevel: f.Toplevel}); err != nil {
		t.Fatal(err)
	}
	res, ev := journaled(t, f, f.Toplevel, j)
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchUnchanged || f.Did("run systemd-run") != 0 || f.Did("finalize "+f.Toplevel) != 1 {
		t.Fatalf("exit %d verdict %+v: %v", res.ExitCode, res.Verdict, f.Log())
	}
	if !logged(ev, "killed in finalize of "+f.Toplevel+"; the node runs it: finalizing again") {
		t.Errorf("no journal line: %q", ev.Logs())
	}
	// The control: with the journal done, the same node is not finalized.
	g := effectstest.Load(t, "healthy")
	res, _ = journaled(t, g, g.Toplevel, j)
	if res.ExitCode != 0 || g.Did("finalize ") != 0 {
		t.Errorf("a rerun after a done journal finalized: exit %d %v", res.ExitCode, g.Log())
	}
}

// The journal is written before the switch and says done at the end; a run
// without a journal entry writes push, switch and finalize in turn.
func TestJournalWrittenBeforeTheSwitch(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.Samples = f.Samples[:1]
	j := &spy{FileJournal: effects.FileJournal{Dir: t.TempDir()}}
	res, _ := journaled(t, f, "/nix/store/11111111111111111111111111111111-nixos-system-new", j)
	_ = res
	var phases []string
	for _, e := range j.recorded {
		phases = append(phases, e.Phase)
	}
	got := strings.Join(phases, ",")
	if !strings.HasPrefix(got, "push,switch,") || !strings.HasSuffix(got, ",done") {
		t.Errorf("journal phases %q, want push,switch,...,done", got)
	}
	for _, e := range j.recorded {
		if e.Phase == effects.JournalSwitch && (!strings.HasPrefix(e.SwitchUnit, "switchyard-switch-") || e.LockToken == 0 || e.PID == 0) {
			t.Errorf("switch entry %+v: want the unit, lock token and pid", e)
		}
	}
}

type spy struct {
	effects.FileJournal
	recorded []effects.JournalEntry
}

func (s *spy) Record(node string, e effects.JournalEntry) error {
	s.recorded = append(s.recorded, e)
	return s.FileJournal.Record(node, e)
}

// A run killed in push changed nothing that needs finishing: the rerun says so,
// deploys as usual and closes the entry (a stale entry would be reported again).
func TestRerunAfterAKillInPushClosesTheEntry(t *testing.T) {
	f := effectstest.Load(t, "healthy") // already running, profile and entry set
	j := effects.FileJournal{Dir: t.TempDir()}
	if err := j.Record("web1", effects.JournalEntry{Phase: effects.JournalPush, Toplevel: f.Toplevel}); err != nil {
		t.Fatal(err)
	}
	res, ev := journaled(t, f, f.Toplevel, j)
	if res.ExitCode != 0 || f.Did("run systemd-run") != 0 || f.Did("finalize ") != 0 {
		t.Fatalf("exit %d: %v", res.ExitCode, f.Log())
	}
	if !logged(ev, "killed in push of "+f.Toplevel+"; deploying as usual") {
		t.Errorf("no journal line: %q", ev.Logs())
	}
	if e, _ := j.Load("web1"); e == nil || e.Phase != effects.JournalDone {
		t.Errorf("journal after the rerun: %+v, want done", e)
	}
}

// A deployer refused by the node's lock changes nothing, its journal entry included:
// the killed run's entry stays for the rerun that gets the lock.
func TestJournalKeptWhenTheLockIsRefused(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.Lock = "9 9999999999 otherhost 1 1 -"
	f.LockGeneration = 9
	j := effects.FileJournal{Dir: t.TempDir()}
	entry := effects.JournalEntry{Phase: effects.JournalSwitch, Toplevel: f.Toplevel, SwitchUnit: "switchyard-switch-17"}
	if err := j.Record("web1", entry); err != nil {
		t.Fatal(err)
	}
	res, _ := journaled(t, f, f.Toplevel, j)
	if res.ExitCode != 2 {
		t.Fatalf("exit %d, want 2 (lock held)", res.ExitCode)
	}
	if e, _ := j.Load("web1"); e == nil || e.Phase != effects.JournalSwitch || e.SwitchUnit != entry.SwitchUnit {
		t.Errorf("journal after the refused run: %+v, want the killed run's", e)
	}
}
