package effects_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/verdict"
)

func rebootConfig() effects.Config {
	c := testConfig(false)
	c.Reboot = true
	return c
}

// apply --reboot: after finalize the node reboots, the body reconnects fresh until the
// boot id changed, and the verdict-only pass of the booted system gives the verdict.
func TestRebootJudgesTheBootedSystem(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.BootID = "boot-1"
	res, ev := deploy(t, f, rebootConfig())
	if res.ExitCode != 0 || res.Verdict.Pass != verdict.PassVerdictOnly || res.Verdict.Toplevel != f.Toplevel || !res.Verdict.OK {
		t.Fatalf("exit %d, verdict %+v; want 0 and the booted system's verdict-only pass", res.ExitCode, res.Verdict)
	}
	if f.Did("run systemctl reboot") != 1 || f.Did("fresh") < 1 {
		t.Errorf("want one reboot and a fresh connection after it: %v", f.Log())
	}
	if vs := ev.Verdicts(); len(vs) != 2 || vs[0].Pass != verdict.PassDeploy || vs[1].Pass != verdict.PassVerdictOnly {
		t.Errorf("verdict events %+v: want the deploy pass's, then the booted system's", vs)
	} else if vs[0].Previous == "" || vs[1].Previous != vs[0].Previous || res.Verdict.Previous != vs[0].Previous {
		t.Errorf("previous: booted %q, result %q; want the deploy's %q (the generation to roll back to)",
			vs[1].Previous, res.Verdict.Previous, vs[0].Previous)
	}
	list := ev.List()
	if i, j := slices.Index(list, "finalize:done"), slices.Index(list, "reboot:start"); i < 0 || j < i {
		t.Errorf("reboot does not follow finalize: %v", list)
	}
}

// A node that comes back on another generation fails (exit 1), both named.
func TestRebootOnAnotherGenerationFails(t *testing.T) {
	f := effectstest.Load(t, "healthy")
	f.BootID, f.RebootInto = "boot-1", "/nix/store/00000000000000000000000000000000-old"
	res, ev := deploy(t, f, rebootConfig())
	if res.ExitCode != 1 {
		t.Fatalf("exit %d, want 1", res.ExitCode)
	}
	want := "booted " + f.RebootInto + ", not the deployed " + f.Toplevel
	if !strings.Contains(strings.Join(ev.Logs(), "\n"), want) {
		t.Errorf("no log says %q: %v", want, ev.Logs())
	}
}

// A node whose verdict failed is not rebooted, and a log line says why.
func TestRebootNotAfterAFailedVerdict(t *testing.T) {
	f := effectstest.Load(t, "failed-unit")
	f.BootID = "boot-1"
	res, ev := deploy(t, f, rebootConfig())
	if res.ExitCode != 1 || f.Did("run systemctl reboot") != 0 || !slices.Contains(ev.List(), "reboot:skipped") {
		t.Errorf("exit %d, log %v, events %v: want exit 1 and no reboot", res.ExitCode, f.Log(), ev.List())
	}
	if !strings.Contains(strings.Join(ev.Logs(), "\n"), "not rebooting") {
		t.Errorf("no log says the node is not rebooted: %v", ev.Logs())
	}
}
