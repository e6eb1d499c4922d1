package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 32 items 3 and 4: the test closures activate as switch-to-configuration-ng
// does (testbed/closures/NG.md), and the verdict is right about what ng leaves behind.

// switchJournal is what the node's switch units wrote to the journal (the test
// closures' switch-to-configuration prints ng's messages to stderr).
func switchJournal(t *testing.T, node *testbed.Node) string {
	t.Helper()
	return node.MustExec(t, "journalctl", "--output", "cat", "--no-pager", "--unit", "switchyard-switch-*")
}

// waitActive waits up to 10 s for unit to be active on node.
func waitActive(t *testing.T, node *testbed.Node, unit string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st := node.UnitProperties(t, unit, "ActiveState")["ActiveState"]
		if st == "active" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, not active", unit, st)
		}
	}
}

// A unit with restartIfChanged = false whose definition changed keeps running its
// previous definition: ng says "NOT restarting the following changed units", and the
// verdict names it in not_restarted, which fails nothing.
func TestDeployNotRestartedUnit(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	first, second := bed.Build(t, "not-restarted", "g1"), bed.Build(t, "not-restarted", "g2")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", first, "--output", "json")...), 0)
	before := node.UnitProperties(t, "keeper.service", "InvocationID", "ActiveState")
	if before["ActiveState"] != "active" {
		t.Fatalf("keeper.service after the first deploy: %v", before)
	}

	r := switchyard(t, nil, deployArgs(node, "--toplevel", second, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	if got := strs(units(t, v, "not_restarted")); strings.Join(got, ",") != "keeper.service" {
		t.Errorf("not_restarted = %v, want [keeper.service]", got)
	}
	if sw := v["switch"].(map[string]any); sw["result"] != "ok" || v["ok"] != true || len(strs(units(t, v, "failed"))) != 0 {
		t.Errorf("verdict: switch %v ok %v failed %v", sw, v["ok"], units(t, v, "failed"))
	}
	// The closure behaves as ng: the unit still runs the invocation of the first
	// generation, and the switch said so.
	if after := node.UnitProperties(t, "keeper.service", "InvocationID")["InvocationID"]; after != before["InvocationID"] {
		t.Errorf("keeper.service was restarted (invocation %s, before %s)", after, before["InvocationID"])
	}
	if j := switchJournal(t, node); !strings.Contains(j, "NOT restarting the following changed units: keeper.service") {
		t.Errorf("the switch did not say it left keeper.service alone:\n%s", j)
	}
}

// A changed socket-activated service: ng stops the service and its socket before the
// activation, starts the socket again and not the service, so a broken new
// definition sits behind a listening socket. The verdict judges the service by its
// socket (not failed, not pending) and names it as not restarted: its new
// definition has not run.
func TestDeploySocketActivatedServiceChanged(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	good, broken := bed.Build(t, "socket-activated", "g1"), bed.Build(t, "socket-activated-broken", "g2")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
	// The service runs, holding its socket's listening fd, as after a first
	// connection. Started by hand rather than by a connection: the service never
	// accepts, so a connection would stay queued on the socket, and a queued
	// connection starts the service again whenever it stops while the socket still
	// listens (as in the switch's stop): the test would race with it.
	node.MustExec(t, "systemctl", "start", "echo.service")
	waitActive(t, node, "echo.service")

	r := switchyard(t, nil, deployArgs(node, "--toplevel", broken, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	if got := strs(units(t, v, "not_restarted")); strings.Join(got, ",") != "echo.service" {
		t.Errorf("not_restarted = %v, want [echo.service]", got)
	}
	if got := strs(units(t, v, "failed")); len(got) != 0 {
		t.Errorf("failed = %v, want none: nothing ran the new definition", got)
	}
	if got, _ := units(t, v, "pending").([]any); len(got) != 0 {
		t.Errorf("pending = %v, want none", got)
	}
	// The closure behaves as ng: the socket listens again, the service is down, and
	// the stop came before the activation.
	socket := node.UnitProperties(t, "echo.socket", "ActiveState")["ActiveState"]
	service := node.UnitProperties(t, "echo.service", "ActiveState")["ActiveState"]
	if socket != "active" || service != "inactive" {
		status, _ := node.Exec(context.Background(), "sh", "-c", "systemctl status --no-pager --full echo.socket echo.service; journalctl --no-pager -o short-precise -u echo.socket -u echo.service")
		t.Errorf("echo.socket is %s, echo.service %s: want active and inactive\n%s", socket, service, status)
	}
	j := switchJournal(t, node)
	stop := strings.LastIndex(j, "stopping the following units: echo.service, echo.socket")
	activate := strings.LastIndex(j, "activating the configuration...")
	start := strings.LastIndex(j, "starting the following units: echo.socket\n")
	if stop < 0 || start < 0 || !(stop < activate && activate < start) {
		t.Errorf("the switch did not stop echo.service and echo.socket, activate, then start echo.socket alone:\n%s", j)
	}
}

// An owned unit that failed before the switch and that nothing pulls in: ng resets
// the failure and does not start it, so it is inactive after the switch, its failed
// run the last it had. The verdict still names it failed.
func TestDeployFailedUnitNothingPullsIn(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	first, second := bed.Build(t, "unpulled-failure", "g1"), bed.Build(t, "unpulled-failure", "g2")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", first, "--output", "json")...), 0)
	// Only what the active targets pull in was started.
	if p := node.UnitProperties(t, "manual.service", "ActiveState", "InvocationID"); p["ActiveState"] != "inactive" || p["InvocationID"] != "" {
		t.Fatalf("manual.service ran although nothing pulls it in: %v", p)
	}
	_, _ = node.Exec(context.Background(), "systemctl", "start", "manual.service") // fails on purpose
	if st := node.UnitProperties(t, "manual.service", "ActiveState")["ActiveState"]; st != "failed" {
		t.Fatalf("manual.service is %s after its start, want failed", st)
	}

	r := switchyard(t, nil, deployArgs(node, "--toplevel", second, "--output", "json")...)
	wantCode(t, r, 1)
	v := r.verdict(t)
	if got := strs(units(t, v, "failed")); strings.Join(got, ",") != "manual.service" {
		t.Errorf("failed = %v, want [manual.service]", got)
	}
	if !strings.Contains(strings.Join(strs(v["reasons"]), ";"), "failed unit: manual.service") {
		t.Errorf("reasons %v", v["reasons"])
	}
	// The closure behaves as ng: the switch reset the failure and did not count it.
	if sw := v["switch"].(map[string]any); sw["result"] != "ok" {
		t.Errorf("switch %v, want ok: the switch resets the failure", sw)
	}
	if st := node.UnitProperties(t, "manual.service", "ActiveState")["ActiveState"]; st != "inactive" {
		t.Errorf("manual.service is %s after the switch, want inactive (reset)", st)
	}
}

// ng counts as failed, once its jobs are done, a service waiting to restart after a
// non-zero exit, although its start job succeeded: exit 4.
func TestDeploySwitchCountsAutoRestartFailure(t *testing.T) {
	node, top := setup(t, "crash-at-once")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	v := r.verdict(t)
	if sw := v["switch"].(map[string]any); sw["result"] != "units-failed" || sw["exit_code"] != 4.0 {
		t.Errorf("switch %v, want units-failed (exit 4)", sw)
	}
	if j := switchJournal(t, node); !strings.Contains(j, "warning: the following units failed: crash-at-once.service") {
		t.Errorf("the switch did not name the unit:\n%s", j)
	}
}

// A changed unit with reloadIfChanged = true: ng reloads it (its new ExecReload runs)
// rather than restarting it, says "reloading the following units", and the deploy is
// healthy with the unit not listed as not restarted (its reload is ng's way of
// putting the new definition in effect).
func TestDeployReloadIfChanged(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	first, second := bed.Build(t, "reload-if-changed", "g1"), bed.Build(t, "reload-if-changed", "g2")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", first, "--output", "json")...), 0)
	before := node.UnitProperties(t, "reloader.service", "InvocationID", "ActiveState")
	if before["ActiveState"] != "active" {
		t.Fatalf("reloader.service after the first deploy: %v", before)
	}

	r := switchyard(t, nil, deployArgs(node, "--toplevel", second, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	if got := strs(units(t, v, "not_restarted")); len(got) != 0 || v["ok"] != true {
		t.Errorf("verdict: ok %v, not_restarted %v; want ok and none", v["ok"], got)
	}
	if after := node.UnitProperties(t, "reloader.service", "InvocationID")["InvocationID"]; after != before["InvocationID"] {
		t.Errorf("reloader.service was restarted (invocation %s, before %s), not reloaded", after, before["InvocationID"])
	}
	if got := strings.TrimSpace(node.MustExec(t, "cat", "/run/switchyard-test-reloads")); got != "g2" {
		t.Errorf("reloads recorded %q, want one by the new definition (g2)", got)
	}
	if j := switchJournal(t, node); !strings.Contains(j, "reloading the following units: reloader.service") {
		t.Errorf("the switch did not say it reloaded reloader.service:\n%s", j)
	}
}

// A unit the new generation drops keeps running when its old file says
// X-StopOnRemoval=false, as ng leaves it; the deploy is healthy.
func TestDeployStopOnRemovalFalse(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	first, second := bed.Build(t, "stop-on-removal", "g1"), bed.Build(t, "stop-on-removal-gone", "g2")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", first, "--output", "json")...), 0)
	waitActive(t, node, "lingerer.service")
	before := node.UnitProperties(t, "lingerer.service", "InvocationID")["InvocationID"]

	r := switchyard(t, nil, deployArgs(node, "--toplevel", second, "--output", "json")...)
	wantCode(t, r, 0)
	after := node.UnitProperties(t, "lingerer.service", "InvocationID", "ActiveState")
	if after["ActiveState"] != "active" || after["InvocationID"] != before {
		t.Errorf("lingerer.service after its removal: %v (invocation before %s), want still running", after, before)
	}
}
