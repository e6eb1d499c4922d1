package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 15 item 1: the per-node journal. A deployer SIGKILLed in the middle of a
// node's deploy leaves its journal entry in the state dir; the rerun reads it and
// looks on the node for what the killed run started, instead of repeating it.

// journalEntry reads the ssh method's journal entry of node in tree's state dir.
// awaitJournaledSwitch waits (at most 5 minutes) until web1's journal entry says the
// running tf apply is in its switch, and returns the entry.
func awaitJournaledSwitch(t *testing.T, tree string, run *bgRun) map[string]any {
	t.Helper()
	path := filepath.Join(tree, ".switchyard", "journal", "web1.json")
	var e map[string]any
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &e) == nil && e["phase"] == "switch" {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider never journaled a switch; stdout:\n%s", run.stdout.String())
		}
	}
}

func journalEntry(t *testing.T, tree, node string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tree, ".switchyard", "journal", node+".json"))
	if err != nil {
		t.Fatalf("the journal of %s: %v", node, err)
	}
	var e map[string]any
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("the journal of %s: %v: %s", node, err, b)
	}
	return e
}

// switchUnitsSeen lists the switchyard switch units the node's journal knows (the
// UNIT field systemd gives its messages about a unit): one per switch started.
func switchUnitsSeen(t *testing.T, node *testbed.Node) []string {
	t.Helper()
	out, err := node.Exec(context.Background(), "journalctl", "--no-pager", "--output=json", "--output-fields=UNIT,_SYSTEMD_UNIT")
	if err != nil {
		t.Fatalf("journalctl: %v", err)
	}
	seen := map[string]bool{}
	var units []string
	for _, line := range strings.Split(out, "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		for _, k := range []string{"UNIT", "_SYSTEMD_UNIT"} {
			if u, ok := e[k].(string); ok && strings.HasPrefix(u, "switchyard-switch-") && !seen[u] {
				seen[u] = true
				units = append(units, u)
			}
		}
	}
	return units
}

// noSwitchUnitLeft checks that no switchyard switch unit is still loaded on the node.
func noSwitchUnitLeft(t *testing.T, node *testbed.Node) {
	t.Helper()
	out, _ := node.Exec(context.Background(), "systemctl", "list-units", "--all", "--plain", "--no-legend", "--no-pager", "switchyard-switch-*")
	if strings.TrimSpace(out) != "" {
		t.Errorf("switch units left on the node: %q", out)
	}
}

func phaseState(r run, node, phase string) string {
	state := ""
	for _, e := range r.events {
		if e["kind"] == "phase" && e["node"] == node && e["phase"] == phase {
			state = fmt.Sprint(e["state"])
		}
	}
	return state
}

// killInSwitch SIGKILLs an ssh apply of tree once its switch started, and returns the
// journal entry it left for web1.
func killInSwitch(t *testing.T, env []string, tree string) map[string]any {
	t.Helper()
	killed := startSwitchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	killed.await(t, 5*time.Minute, "the switch started", func(e map[string]any) bool {
		return e["kind"] == "phase" && e["phase"] == "switch" && e["state"] == "done"
	})
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	return journalEntry(t, tree, "web1")
}

// The deployer is SIGKILLed while the switch runs (slow-switch sleeps 15 s between
// installing the boot entry and activating); the rerun, at once, finds the killed
// run's unit on the node from the journal, waits for it and takes its result as the
// switch's: it starts no second switch, exits 0 with verdict ok, and leaves the
// profile and boot entry on the new toplevel, no lock and no switch unit behind.
func TestJournalRerunAfterKillDuringSwitch(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "ssh", "slow-switch", map[string]*testbed.Node{"web1": node})
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}

	e := killInSwitch(t, env, tree)
	unit, _ := e["switchUnit"].(string)
	top, _ := e["toplevel"].(string)
	if e["phase"] != "switch" || !strings.HasPrefix(unit, "switchyard-switch-") || !strings.HasPrefix(top, "/nix/store/") {
		t.Fatalf("the killed run's journal entry: %v", e)
	}
	if p := node.UnitProperties(t, unit, "ActiveState"); p["ActiveState"] != "activating" {
		t.Fatalf("the killed run's switch is not running when the rerun starts (%v): the test proves nothing", p)
	}

	r := switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	want := "web1: journal: the last run (deployer host "
	if countLogs(r, "web1", strings.TrimPrefix(want, "web1: ")) != 1 ||
		countLogs(r, "web1", "was killed in switch of "+top+"; its unit "+unit+" is still on the node: not switching again") != 1 {
		t.Errorf("the rerun does not say what it found from the journal: %q", logMsgs(r))
	}
	v := verdicts(t, r)["web1"]
	if v == nil || v["ok"] != true || v["toplevel"] != top || v["switch"].(map[string]any)["result"] != "ok" {
		t.Errorf("verdict %v, want ok with the killed run's switch result (ok)", v)
	}
	if got := phaseState(r, "web1", "switch"); got != "skipped" {
		t.Errorf("the rerun's switch phase %q, want skipped", got)
	}
	if units := switchUnitsSeen(t, node); len(units) != 1 || units[0] != unit+".service" {
		t.Errorf("switch units started on the node: %q, want only the killed run's %s", units, unit)
	}
	if st := nodeState(t, node); st != [3]string{top, top, top} {
		t.Errorf("node (running, profile, boot entry) %v, want %s everywhere", st, top)
	}
	if e := journalEntry(t, tree, "web1"); e["phase"] != "done" {
		t.Errorf("the journal after the rerun: %v, want done", e)
	}
	noStaleLock(t, node)
	noSwitchUnitLeft(t, node)
}

// Issue 30 item 4: the deployer is SIGKILLed while the switch runs, the switch ends,
// and then the node is switched by hand to another generation before the rerun. The
// killed run's unit is still loaded, but it says nothing of what the node runs now:
// the rerun unloads it and switches again (exit 0, the node on the toplevel), instead
// of taking the old unit's result and reporting never-confirmed.
func TestJournalRerunAfterNodeMoved(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	before, hand := bed.Build(t, "healthy", "before"), bed.Build(t, "healthy", "by-hand")
	node.CopyClosure(t, before)
	if code := node.Switch(t, before, "switch"); code != 0 {
		t.Fatalf("switching to %s by hand: exit %d", before, code)
	}
	tree, deployment := treeFor(t, "ssh", "slow-switch", map[string]*testbed.Node{"web1": node})
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}

	e := killInSwitch(t, env, tree)
	unit, _ := e["switchUnit"].(string)
	top, _ := e["toplevel"].(string)
	if e["phase"] != "switch" || unit == "" {
		t.Fatalf("the killed run's journal entry: %v", e)
	}
	if e["previous"] != before {
		t.Errorf("the killed run's journal entry does not keep the generation the node ran: %v", e)
	}
	for deadline := time.Now().Add(2 * time.Minute); node.UnitProperties(t, unit, "ActiveState")["ActiveState"] != "active"; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed run's switch never ended: %v", node.UnitProperties(t, unit, "ActiveState"))
		}
	}
	node.CopyClosure(t, hand)
	if code := node.Switch(t, hand, "switch"); code != 0 {
		t.Fatalf("switching to %s by hand: exit %d", hand, code)
	}

	r := switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if countLogs(r, "web1", "its unit "+unit+" is still on the node, but the node runs "+hand+" since") != 1 {
		t.Errorf("the rerun does not say what it found: %q", logMsgs(r))
	}
	v := verdicts(t, r)["web1"]
	if v == nil || v["ok"] != true || v["toplevel"] != top || v["switch"].(map[string]any)["result"] != "ok" {
		t.Errorf("verdict %v, want ok, switched again to %s", v, top)
	}
	if st := nodeState(t, node); st != [3]string{top, top, top} {
		t.Errorf("node (running, profile, boot entry) %v, want %s everywhere", st, top)
	}
	noStaleLock(t, node)
	noSwitchUnitLeft(t, node)
}

// The deployer is SIGKILLed in finalize (the test seam pauses it there), after the
// system profile was set (the test sets it, as the first of finalize's two steps
// does): profile and boot entry both read right, yet the entry's write may have been
// cut. The rerun reads the journal and finalizes again.
func TestJournalRerunAfterKillDuringFinalize(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := lockTree(t, "ssh", node, "A")
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}

	killed := startSwitchyard(t, append(env, "SWITCHYARD_TEST_PAUSE_IN_FINALIZE=60"), "ssh", "apply", "--tree", tree, "--output", "json")
	killed.await(t, 5*time.Minute, "finalize", func(e map[string]any) bool {
		return e["kind"] == "phase" && e["phase"] == "finalize" && e["state"] == "start"
	})
	// The phase's start event comes before its journal entry: kill once it is written.
	for deadline := time.Now().Add(20 * time.Second); journalEntry(t, tree, "web1")["phase"] != "finalize"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the journal never said finalize: %v", journalEntry(t, tree, "web1"))
		}
	}
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	e := journalEntry(t, tree, "web1")
	top, _ := e["toplevel"].(string)

	if e["phase"] != "finalize" || !strings.HasPrefix(top, "/nix/store/") {
		t.Fatalf("the killed run's journal entry: %v", e)
	}
	node.MustExec(t, "nix-env", "-p", "/nix/var/nix/profiles/system", "--set", top)
	if st := nodeState(t, node); st != [3]string{top, top, top} {
		t.Fatalf("before the rerun the node is %v, want %s everywhere (the state a cut entry write leaves)", st, top)
	}

	r := switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if countLogs(r, "web1", "was killed in finalize of "+top+"; the node runs it: finalizing again") != 1 {
		t.Errorf("the rerun does not say what it found from the journal: %q", logMsgs(r))
	}
	if got := phaseState(r, "web1", "finalize"); got != "done" {
		t.Errorf("the rerun's finalize phase %q, want done", got)
	}
	v := verdicts(t, r)["web1"]
	if v == nil || v["ok"] != true || v["toplevel"] != top || v["boot_entry"] != top {
		t.Errorf("verdict %v", v)
	}
	if st := nodeState(t, node); st != [3]string{top, top, top} {
		t.Errorf("node %v, want %s everywhere", st, top)
	}
	if e := journalEntry(t, tree, "web1"); e["phase"] != "done" {
		t.Errorf("the journal after the rerun: %v, want done", e)
	}
	noStaleLock(t, node)
	noSwitchUnitLeft(t, node)
}

// `tf apply`: the provider runs the body and keeps the journal in the state dir
// (contract.Run.JournalDir). switchyard is SIGKILLed once the provider journaled the
// switch (OpenTofu dies with it, Pdeathsig; the provider plugin with OpenTofu); the
// rerun's provider finds the killed run's switch on the node from the journal and
// starts no second one.
func TestJournalTFRerunAfterKillDuringSwitch(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "tf", "slow-switch", map[string]*testbed.Node{"web1": node})
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir(), "BOOTSTRAP=1", "BOOTSTRAP_SEED=x"}

	killed := startSwitchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	e := awaitJournaledSwitch(t, tree, killed)
	unit, _ := e["switchUnit"].(string)
	top, _ := e["toplevel"].(string)
	// Kill once systemd runs the unit (systemd-run may still be on its way).
	for deadline := time.Now().Add(30 * time.Second); node.UnitProperties(t, unit, "ActiveState")["ActiveState"] != "activating"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the switch unit %s never ran", unit)
		}
	}
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	pid := int(e["pid"].(float64))
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the provider (pid %d) outlived switchyard and OpenTofu by 30 s", pid)
		}
	}

	r := switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	all := strings.Join(logMsgs(r), "\n") + r.stderr
	if !strings.Contains(all, "was killed in switch of "+top+"; its unit "+unit+" is still on the node: not switching again") {
		t.Errorf("the rerun does not say what it found from the journal: %s", all)
	}
	if v := verdicts(t, r)["web1"]; v == nil || v["ok"] != true || v["toplevel"] != top || v["switch"].(map[string]any)["result"] != "ok" {
		t.Errorf("verdict %v, want ok with the killed run's switch result (ok)", v)
	}
	if units := switchUnitsSeen(t, node); len(units) != 1 || units[0] != unit+".service" {
		t.Errorf("switch units started on the node: %q, want only the killed run's %s", units, unit)
	}
	if st := nodeState(t, node); st != [3]string{top, top, top} {
		t.Errorf("node (running, profile, boot entry) %v, want %s everywhere", st, top)
	}
	if e := journalEntry(t, tree, "web1"); e["phase"] != "done" {
		t.Errorf("the journal after the rerun: %v, want done", e)
	}
	noStaleLock(t, node)
	noSwitchUnitLeft(t, node)
}

// Issue 30 item 2: the deployer is SIGKILLed between the switch and its confirmation
// (the test seam holds it there). The node had activated the new generation and
// waits for the marker; with nobody to write it, the node switches itself back after
// DEPLOY_CONFIRM_TIMEOUT. The rerun reads the killed run's record and reports that
// the node rolled back (exit 1, switch.result rolled-back): it starts no second
// switch and writes no marker, since it never saw that generation activate.
func TestJournalRerunAfterKillBeforeConfirm(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	before := bed.Build(t, "healthy", "before")
	node.CopyClosure(t, before)
	if code := node.Switch(t, before, "switch"); code != 0 {
		t.Fatalf("switching to %s by hand: exit %d", before, code)
	}
	tree, deployment := treeFor(t, "ssh", "healthy", map[string]*testbed.Node{"web1": node})
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir(), "DEPLOY_CONFIRM_TIMEOUT=3"}

	killed := startSwitchyard(t, append(env, "SWITCHYARD_TEST_PAUSE_BEFORE_CONFIRM=600"), "ssh", "apply", "--tree", tree, "--output", "json")
	killed.await(t, 5*time.Minute, "the switch ended", func(e map[string]any) bool {
		return e["kind"] == "phase" && e["phase"] == "confirm" && e["state"] == "start"
	})
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	e := journalEntry(t, tree, "web1")
	unit, _ := e["switchUnit"].(string)
	top, _ := e["toplevel"].(string)
	if e["phase"] != "switch" || unit == "" || top == before {
		t.Fatalf("the killed run's journal entry: %v", e)
	}
	dir := "/run/switchyard/switch/" + unit
	// The node's own decision, without any deployer.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		out, _ := node.Exec(context.Background(), "cat", dir+"/state")
		if strings.TrimSpace(out) == "rolled-back" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node's record of %s says %q two minutes after the kill, want rolled-back", unit, out)
		}
	}
	if st := nodeState(t, node); st != [3]string{before, before, before} {
		t.Fatalf("after its rollback the node is %v, want %s everywhere", st, before)
	}

	r := switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 1)
	if countLogs(r, "web1", "was killed in switch of "+top+"; its unit "+unit+" is still on the node: not switching again") != 1 {
		t.Errorf("the rerun does not say what it found from the journal: %q", logMsgs(r))
	}
	v := verdicts(t, r)["web1"]
	if v == nil || v["ok"] != false || v["switch"].(map[string]any)["result"] != "rolled-back" || v["toplevel"] != top || v["boot_entry"] != before {
		t.Errorf("verdict %v, want not ok, switch of %s rolled-back, boot entry back on %s", v, top, before)
	}
	if units := switchUnitsSeen(t, node); len(units) != 1 || units[0] != unit+".service" {
		t.Errorf("switch units started on the node: %q, want only the killed run's %s", units, unit)
	}
	if out, _ := node.Exec(context.Background(), "ls", "-A", dir); strings.Contains(out, "confirm") {
		t.Errorf("the rerun wrote a confirmation marker for a generation it never saw activate: %s holds %q", dir, out)
	}
	if st := nodeState(t, node); st != [3]string{before, before, before} {
		t.Errorf("after the rerun the node is %v, want %s everywhere", st, before)
	}
	noStaleLock(t, node)
	noSwitchUnitLeft(t, node)
}
