package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 34 item 3: apply --reboot reboots the node once finalize pointed its boot entry
// at the new generation (the container restarts from inside: `systemctl reboot`, its
// boot entry /sbin/init), waits for a new boot id, checks /run/booted-system and gives
// the verdict of the booted system, a verdict-only pass. A node that comes back on
// another generation fails with both named.
func TestSSHApplyReboot(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	g := newGenBed(t, bed)
	node := g.node
	bootID := func() string { return strings.TrimSpace(node.MustExec(t, "cat", "/proc/sys/kernel/random/boot_id")) }

	r := g.run(t, "a", "apply")
	wantCode(t, r, 0)
	a := fmt.Sprint(r.verdict(t)["toplevel"])

	before := bootID()
	r = g.run(t, "b", "apply", "--reboot", "--reboot-timeout", "3m")
	wantCode(t, r, 0)
	deployed := fmt.Sprint(r.verdict(t)["toplevel"]) // the deploy pass's verdict comes first
	v := verdicts(t, r)["web1"]                      // the booted system's, last
	if deployed == a || v["pass"] != "verdict-only" || v["toplevel"] != deployed || v["ok"] != true {
		t.Errorf("--reboot: last verdict pass %v, toplevel %v, ok %v; want verdict-only, %s, ok\nstderr:\n%s",
			v["pass"], v["toplevel"], v["ok"], deployed, r.stderr)
	}
	if !phaseDone(r, "reboot") {
		t.Errorf("--reboot: no reboot phase done; phases %v", phaseOrder(r))
	}
	if after := bootID(); after == before {
		t.Errorf("--reboot: boot id still %s: the node did not reboot", before)
	}
	if got := node.Readlink(t, "/run/booted-system"); got != deployed {
		t.Errorf("--reboot: /run/booted-system %s, want %s", got, deployed)
	}

	// The node's firmware boots generation b whatever its boot entry says: the deploy
	// of c sets the entry, the node comes back on b, and the run fails naming both.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := node.BootInstead(ctx, deployed+"/init"); err != nil {
		t.Fatal(err)
	}
	before = bootID()
	r = g.run(t, "c", "apply", "--reboot", "--reboot-timeout", "3m")
	wantCode(t, r, 1)
	c := fmt.Sprint(r.verdict(t)["toplevel"])
	if c == deployed || !strings.Contains(r.stdout, "booted "+deployed+", not the deployed "+c) {
		t.Errorf("came back on another generation: no event names both %s and %s:\n%s", deployed, c, r.stdout)
	}
	for _, e := range r.events {
		if e["kind"] == "log" && strings.Contains(fmt.Sprint(e["msg"]), "another generation") {
			t.Logf("%s: %s", e["level"], e["msg"])
		}
	}
	if after := bootID(); after == before {
		t.Errorf("boot id still %s: the node did not reboot", before)
	}
	if got := node.Readlink(t, "/run/booted-system"); got != deployed {
		t.Errorf("/run/booted-system %s, want %s (what the firmware booted)", got, deployed)
	}
	if err := node.BootInstead(ctx, ""); err != nil {
		t.Fatal(err)
	}

	// Refused before any node is touched: one line naming the flag, exit 2.
	for _, args := range [][]string{{"--reboot", "--mode", "test"}, {"--reboot", "--reboot-timeout", "0s"}} {
		r = g.run(t, "d", "apply", args...)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "--reboot") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("apply %v: refusal %q, want one line naming --reboot", args, r.stderr)
		}
	}
}

// phaseDone tells whether phase ended done.
func phaseDone(r run, phase string) bool {
	for _, e := range r.events {
		if e["kind"] == "phase" && e["phase"] == phase && e["state"] == "done" {
			return true
		}
	}
	return false
}

// Issue 34 item 3: a node the deploy reports reboot-needed (switch-to-configuration
// exit 100: TestDeployRebootNeeded shows it keeps running the old generation without
// the flag) is rebooted with --reboot and judged on the generation it then runs.
func TestDeployRebootNeededReboots(t *testing.T) {
	node, good := setup(t, "healthy")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
	next := testbed.Require(t).Build(t, "needs-reboot", "")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", next, "--output", "json", "--reboot", "--reboot-timeout", "3m")...)
	wantCode(t, r, 0)
	if sw := r.verdict(t)["switch"].(map[string]any); sw["result"] != "reboot-needed" {
		t.Errorf("deploy pass: switch %v, want reboot-needed", sw)
	}
	v := verdicts(t, r)["web1"]
	if v["pass"] != "verdict-only" || v["toplevel"] != next || v["ok"] != true {
		t.Errorf("after the reboot: verdict pass %v, toplevel %v, ok %v; want verdict-only, %s, ok", v["pass"], v["toplevel"], v["ok"], next)
	}
	for _, link := range []string{"/run/current-system", "/run/booted-system"} {
		if got := node.Readlink(t, link); got != next {
			t.Errorf("%s -> %s, want %s", link, got, next)
		}
	}
}
