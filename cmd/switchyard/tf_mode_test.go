package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 34 items 2 and 3 through the tf method (one node reached by its host): the
// provider's deploy body takes apply --mode and --reboot from the run. --mode boot
// sets the profile and boot entry and is not judged; the refresh after it sees no
// drift (the node runs its old generation until it boots), so a plan changes nothing.
// apply --reboot deploys that node again and reboots it: a new boot id,
// /run/booted-system the deployed toplevel, and the state's verdict the booted
// system's verdict-only pass. --mode test activates and leaves the profile; the
// refresh sees the profile elsewhere (drift), so the plain apply after it finalizes
// the node for real. Refusals are exit 2 with one line naming the flag.
func TestTFApplyModesReboot(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	g := newGenBedFor(t, bed, "tf", "healthy")
	node := g.node
	running := func() string { return node.Readlink(t, "/run/current-system") }
	profile := func() string {
		return strings.TrimSpace(node.MustExec(t, "readlink", "-f", "/nix/var/nix/profiles/system"))
	}
	bootID := func() string { return strings.TrimSpace(node.MustExec(t, "cat", "/proc/sys/kernel/random/boot_id")) }
	switchOf := func(v map[string]any) any { sw, _ := v["switch"].(map[string]any); return sw["result"] }

	before := running()
	r := g.run(t, "a", "apply", "--mode", "boot")
	wantCode(t, r, 0)
	v := r.verdict(t)
	a := fmt.Sprint(v["toplevel"])
	if switchOf(v) != "boot" || v["ok"] != true || v["boot_entry"] != a {
		t.Errorf("--mode boot: verdict switch %v, ok %v, boot_entry %v; want boot, ok, %s", switchOf(v), v["ok"], v["boot_entry"], a)
	}
	if running() != before || profile() != a {
		t.Errorf("--mode boot: running %s (want %s: nothing activated), profile %s (want %s)", running(), before, profile(), a)
	}

	r = g.run(t, "a", "plan")
	wantCode(t, r, 0)
	if p := planEvents(r); p["web1"] || countLogs(r, "web1", "drift") != 0 {
		t.Errorf("plan after --mode boot: changed %v, logs %q; want no change and no drift", p, logMsgs(r))
	}

	id := bootID()
	r = g.run(t, "a", "apply", "--reboot", "--reboot-timeout", "3m")
	wantCode(t, r, 0)
	v = r.verdict(t)
	if v["pass"] != "verdict-only" || v["toplevel"] != a || v["ok"] != true || v["previous"] == a {
		t.Errorf("--reboot: verdict pass %v, toplevel %v, ok %v, previous %v; want the booted %s's verdict-only pass, ok, the generation before\nstderr:\n%s",
			v["pass"], v["toplevel"], v["ok"], v["previous"], a, r.stderr)
	}
	if after := bootID(); after == id {
		t.Errorf("--reboot: boot id still %s: the node did not reboot", id)
	}
	if got := node.Readlink(t, "/run/booted-system"); got != a || running() != a {
		t.Errorf("--reboot: /run/booted-system %s, running %s, want %s", got, running(), a)
	}

	r = g.run(t, "b", "apply", "--mode", "test")
	wantCode(t, r, 0)
	v = r.verdict(t)
	b := fmt.Sprint(v["toplevel"])
	if b == a || switchOf(v) != "ok" || v["boot_entry"] != a || running() != b || profile() != a {
		t.Errorf("--mode test: verdict switch %v, boot_entry %v, running %s, profile %s; want ok, %s running %s, profile and entry left on %s",
			switchOf(v), v["boot_entry"], running(), profile(), b, b, a)
	}

	r = g.run(t, "b", "apply")
	wantCode(t, r, 0)
	v = r.verdict(t)
	if switchOf(v) != "unchanged" || v["boot_entry"] != b || profile() != b || running() != b {
		t.Errorf("plain apply after --mode test: verdict switch %v, boot_entry %v, profile %s, running %s; want unchanged, all %s\nlogs %q",
			switchOf(v), v["boot_entry"], profile(), running(), b, logMsgs(r))
	}

	for _, c := range []struct{ flag, args string }{
		{"--reboot", "--reboot --mode test"}, {"--reboot-timeout", "--reboot --reboot-timeout 0s"}, {"--mode", "--mode dry"},
	} {
		r = g.run(t, "c", "apply", strings.Fields(c.args)...)
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, c.flag) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("apply %s: refusal %q, want one line naming %s", c.args, r.stderr, c.flag)
		}
	}
	if running() != b || profile() != b {
		t.Errorf("a refused apply changed the node: running %s, profile %s", running(), profile())
	}
}
