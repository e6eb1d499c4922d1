package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/verdict"
)

// The per-node journal (issue 15): the deployer writes, before each step that
// changes a node (push, switch, finalize, revert), which step it starts with which
// toplevel. A deployer killed in the middle leaves the entry behind, and the rerun
// reads it: it looks the started switch up on the node instead of starting another
// one, and finishes a finalize that was cut. The journal lives on the deployer's
// side because the node may not be reachable, or may have rebooted, when the
// deployer dies; what the node shows is still checked before anything is decided.

// Journal keeps one entry per node: the last step a deployer started on it.
type Journal interface {
	// Load is the node's entry; nil when there is none.
	Load(node string) (*JournalEntry, error)
	// Record replaces the node's entry, durably, before the step it names starts.
	Record(node string, e JournalEntry) error
}

// Journal phases: the steps that change a node, and done (the body concluded).
const (
	JournalPush     = "push"
	JournalSwitch   = "switch"
	JournalFinalize = "finalize"
	JournalRevert   = "revert"
	JournalDone     = "done"
)

// JournalEntry is what a deployer had started on a node.
type JournalEntry struct {
	Phase      string    `json:"phase"`
	Toplevel   string    `json:"toplevel"`
	SwitchUnit string    `json:"switchUnit,omitempty"` // the transient unit of the switch (phase switch and later)
	Previous   string    `json:"previous,omitempty"`   // the generation the node ran when the run began
	LockToken  uint64    `json:"lockToken,omitempty"`  // the node lock's token the deployer held
	Time       time.Time `json:"time"`
	Host       string    `json:"host"`            // the deployer's host (lockIdentity)
	PID        int       `json:"pid"`             // the deployer's pid
	Where      string    `json:"where,omitempty"` // the deployer's process space (lockHolder.Where)
	ExitCode   *int      `json:"exitCode,omitempty"`
}

// FileJournal is a Journal of files: Dir/<node>.json, each written to a temporary
// file, fsynced and renamed over the old one, so a deployer killed while writing
// leaves the previous entry or the new one, never half of one.
type FileJournal struct{ Dir string }

func (j FileJournal) path(node string) (string, error) {
	if node == "" || strings.ContainsAny(node, `/\`) || node == "." || node == ".." {
		return "", fmt.Errorf("journal: node name %q cannot name a file", node)
	}
	return filepath.Join(j.Dir, node+".json"), nil
}

// Load reads the node's entry; a missing file is no entry, a file that does not
// parse is an error naming it.
func (j FileJournal) Load(node string) (*JournalEntry, error) {
	p, err := j.path(node)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	var e JournalEntry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("journal: %s: %w", p, err)
	}
	if e.Phase == "" || e.Toplevel == "" {
		return nil, fmt.Errorf("journal: %s: no phase or toplevel", p)
	}
	return &e, nil
}

// Record writes the node's entry atomically (temporary file, fsync, rename, fsync of
// the directory), readable by the deployer's user only.
func (j FileJournal) Record(node string, e JournalEntry) error {
	p, err := j.path(node)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := os.MkdirAll(j.Dir, 0o700); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	f, err := os.CreateTemp(j.Dir, "."+node+".json.*")
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename: nothing
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("journal: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if d, err := os.Open(j.Dir); err == nil {
		_ = d.Sync() // the rename itself durable
		d.Close()
	}
	return nil
}

// rerunAction is what a body does about the entry a killed deployer left.
type rerunAction int

const (
	rerunNone          rerunAction = iota // nothing left to find out: deploy as usual
	rerunAdoptSwitch                      // the switch of this toplevel started: its unit is the switch's result
	rerunSwitched                         // its unit is gone and the node runs the toplevel: finalize it
	rerunSwitchAgain                      // its unit is gone and the node does not run it: switch again
	rerunFinalize                         // finalize of this toplevel was cut: run it again
	rerunOtherToplevel                    // the killed run deployed another toplevel: deploy this one as usual
	rerunNodeMoved                        // its unit is loaded but the node runs another generation since: unload it, switch again
)

// nodeFacts is what the node shows of a killed run's switch.
type nodeFacts struct {
	Current   string // /run/current-system
	UnitState string // the switch unit's LoadState ("" when there was no unit to ask about)
}

// decideRerun decides from the journal's entry, the toplevel of this run and what the
// node shows; the message says what was found, for the log. The node lock is taken
// by then, so no other deployer's switch runs.
func decideRerun(e *JournalEntry, toplevel string, f nodeFacts) (rerunAction, string) {
	if e == nil || e.Phase == JournalDone {
		return rerunNone, ""
	}
	what := fmt.Sprintf("journal: the last run (deployer host %s, pid %d, %s) was killed in %s of %s",
		e.Host, e.PID, e.Time.UTC().Format(time.RFC3339), e.Phase, e.Toplevel)
	if e.Toplevel != toplevel {
		return rerunOtherToplevel, what + "; deploying " + toplevel + " now"
	}
	switch e.Phase {
	case JournalSwitch:
		switch {
		case e.SwitchUnit != "" && f.UnitState != "" && f.UnitState != "not-found" && moved(e, toplevel, f.Current):
			return rerunNodeMoved, fmt.Sprintf("%s; its unit %s is still on the node, but the node runs %s since, neither %s it ran then nor %s: unloading the unit and switching again",
				what, e.SwitchUnit, f.Current, e.Previous, toplevel)
		case e.SwitchUnit != "" && f.UnitState != "" && f.UnitState != "not-found":
			return rerunAdoptSwitch, fmt.Sprintf("%s; its unit %s is still on the node: not switching again, reading its result", what, e.SwitchUnit)
		case f.Current == toplevel:
			return rerunSwitched, fmt.Sprintf("%s; its unit %s is gone and the node runs %s: the switch completed; not switching again", what, orNone(e.SwitchUnit), toplevel)
		}
		return rerunSwitchAgain, fmt.Sprintf("%s; its unit %s is gone and the node runs %s: switching again", what, orNone(e.SwitchUnit), orNone(f.Current))
	case JournalFinalize:
		if f.Current == toplevel {
			return rerunFinalize, what + "; the node runs it: finalizing again"
		}
		return rerunNone, fmt.Sprintf("%s; the node runs %s now: deploying as usual", what, orNone(f.Current))
	}
	// push and revert: repeating them is harmless, and the node's state decides.
	return rerunNone, what + "; deploying as usual"
}

// moved: the node runs a generation that is neither the one it ran when the killed
// run began nor that run's toplevel, so another deploy or a hand switch came in
// between, and the killed run's unit says nothing of what the node runs now.
func moved(e *JournalEntry, toplevel, current string) bool {
	return e.Previous != "" && current != "" && current != e.Previous && current != toplevel
}

// journalHolderGone tells whether the lock's holder is the deployer the journal
// names, on this deployer's host, and that deployer is gone: its pid has ended (same
// process space), or the host rebooted since (another boot id). The rerun then does
// not wait for that lock's lease.
func journalHolderGone(e *JournalEntry, h *lockHolder, me deployer, alive func(pid int) bool) bool {
	if e == nil || h == nil || e.LockToken == 0 || e.LockToken != h.Token || e.Host != me.Host ||
		h.Host != e.Host || h.PID != e.PID || e.Where == "" || e.Where == "-" || me.Where == "-" {
		return false
	}
	if bootOf(e.Where) != bootOf(me.Where) {
		return true
	}
	return e.Where == me.Where && e.PID != me.PID && !alive(e.PID)
}

func bootOf(where string) string {
	b, _, _ := strings.Cut(where, "/")
	return b
}

// journalRecord writes the node's entry before a step that changes the node. A
// journal that cannot be written is a warning: the node's own state (lock, running
// system, profile, boot entry) still protects a rerun, only less well informed.
func (r *run) journalRecord(phase string) {
	if r.d.Journal == nil {
		return
	}
	me := lockIdentity()
	e := JournalEntry{Phase: phase, Toplevel: r.v.Toplevel, SwitchUnit: r.switchUnit, Previous: r.previous, Time: time.Now().UTC(),
		Host: me.Host, PID: me.PID, Where: me.Where}
	if r.lock != nil {
		e.LockToken = r.lock.token
	}
	if phase == JournalDone {
		code := r.exit
		e.ExitCode = &code
	}
	if err := r.d.Journal.Record(r.d.Node, e); err != nil {
		r.log("warn", "%s: %s: %v", r.d.Node, phase, err)
		return
	}
	r.journaled = true
}

// journalLoad reads the entry a previous run left, once per body.
func (r *run) journalLoad() *JournalEntry {
	if r.d.Journal == nil || r.journalRead {
		return r.lastRun
	}
	r.journalRead = true
	e, err := r.d.Journal.Load(r.d.Node)
	if err != nil {
		r.log("warn", "%s: %v (ignored: the node's own state decides)", r.d.Node, err)
		return nil
	}
	r.lastRun = e
	return e
}

// resume looks up on the node what the entry of a killed run says it started, once
// the lock is this body's, and decides (decideRerun). It reports whether it decided
// the snapshot's outcome: a killed run's switch taken over, or finalize to run again.
func (r *run) resume(ctx context.Context, current string) bool {
	e := r.lastRun
	if e == nil || e.Phase == JournalDone {
		return false
	}
	facts := nodeFacts{Current: current}
	if e.SwitchUnit != "" {
		out, err := r.execCheck(ctx, switchStatusArgv(e.SwitchUnit)...)
		if err != nil {
			r.log("warn", "%s: journal: the last run was killed in %s of %s; its switch unit %s could not be read (%v): deploying as usual",
				r.d.Node, e.Phase, e.Toplevel, e.SwitchUnit, err)
			return false
		}
		facts.UnitState = parseProps(out)["LoadState"]
	}
	action, msg := decideRerun(e, r.toplevel, facts)
	r.log("info", "%s: %s", r.d.Node, msg)
	r.resumed, r.journalNote = true, msg
	switch action {
	case rerunAdoptSwitch:
		r.adopted = true
		r.switchUnit = e.SwitchUnit
		r.switchStarted = true
		r.v.Switch.Result, r.v.Switch.ExitCode = verdict.SwitchError, -1
		return true
	case rerunSwitched, rerunFinalize:
		if !r.d.SkipUnchanged {
			return false // a deploy that always switches switches again
		}
		r.unchanged = true
		r.confirmed = true
		r.v.Switch.Result = verdict.SwitchUnchanged
		return true
	case rerunOtherToplevel, rerunNodeMoved:
		if e.SwitchUnit != "" && facts.UnitState != "" && facts.UnitState != "not-found" {
			// The killed run's switch ended (the lock waited for it): its unit stays
			// loaded (RemainAfterExit) until someone unloads it.
			r.log("info", "%s: journal: unloading the switch unit %s of the last run", r.d.Node, e.SwitchUnit)
			_, _, _ = r.exec(ctx, "systemctl", "stop", "--", e.SwitchUnit)
			_, _, _ = r.exec(ctx, "systemctl", "reset-failed", "--", e.SwitchUnit)
		}
	}
	return false
}
