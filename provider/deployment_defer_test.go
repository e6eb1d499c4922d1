package provider

import (
	"testing"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/verdict"
)

// TestDeferrable: a tenant's deploy leaves to the pass after registration only a
// verdict that failed for its units, with the toplevel switched to (issue 12 item 5).
func TestDeferrable(t *testing.T) {
	for _, c := range []struct {
		code   int
		result verdict.SwitchResult
		want   bool
	}{
		{1, verdict.SwitchOK, true},
		{1, verdict.SwitchUnitsFailed, true},
		{1, verdict.SwitchUnchanged, true},
		{1, verdict.SwitchNeverConfirmed, false},
		{1, verdict.SwitchError, false},
		{1, verdict.SwitchRebootNeeded, false},
		{1, verdict.SwitchSkipped, false},
		{3, verdict.SwitchOK, false},
		{2, verdict.SwitchSkipped, false},
		{0, verdict.SwitchOK, false},
	} {
		res := effects.Result{ExitCode: c.code, Verdict: verdict.Verdict{Switch: verdict.Switch{Result: c.result}}}
		if got := deferrable(res); got != c.want {
			t.Errorf("exit %d, switch %s: deferrable %v, want %v", c.code, c.result, got, c.want)
		}
	}
	// apply --reboot: the booted system's verdict-only pass failed for its units is
	// deferred; a node that came back on another generation (after the report) is not.
	booted := effects.Result{ExitCode: 1, Verdict: verdict.Verdict{Pass: verdict.PassVerdictOnly, Switch: verdict.Switch{Result: verdict.SwitchSkipped}}}
	if !deferrable(booted) {
		t.Error("the booted system's units failed: not deferred")
	}
	other := effects.Result{ExitCode: 1, Verdict: verdict.Verdict{Switch: verdict.Switch{Result: verdict.SwitchOK}},
		Late: []string{"reboot: the node came back on another generation"}}
	if deferrable(other) {
		t.Error("a node that came back on another generation is deferred")
	}
}

// TestRebootDue: apply --reboot deploys again a node whose last deploy left its
// toplevel for the next boot and that does not run it (or could not be read); a node
// that runs it, or whose deploy did not leave it for a boot, is left to OpenTofu.
func TestRebootDue(t *testing.T) {
	const a, b = "/nix/store/a", "/nix/store/b"
	for _, c := range []struct {
		recorded verdict.SwitchResult
		running  string
		want     bool
	}{
		{verdict.SwitchBoot, a, true},
		{verdict.SwitchRebootNeeded, a, true},
		{verdict.SwitchBoot, "", true},
		{verdict.SwitchBoot, b, false},
		{verdict.SwitchRebootNeeded, b, false},
		{verdict.SwitchOK, a, false},
		{verdict.SwitchUnchanged, a, false},
		{verdict.SwitchHeld, a, false},
	} {
		if got := rebootDue(c.recorded, b, c.running); got != c.want {
			t.Errorf("recorded %s, runs %q: rebootDue %v, want %v", c.recorded, c.running, got, c.want)
		}
	}
}

// TestVerdictFailure: the diagnostic names why, the verdict's reasons and then what
// failed after the report (issue 31 item 10), never only the exit code when a
// reason is known.
func TestVerdictFailure(t *testing.T) {
	for _, c := range []struct {
		res  effects.Result
		want string
	}{
		{effects.Result{ExitCode: 3, Verdict: verdict.Verdict{OK: true}, Late: []string{"finalize: install the boot entry: no init"}},
			"web1: finalize: install the boot entry: no init"},
		{effects.Result{ExitCode: 1, Verdict: verdict.Verdict{Reasons: []string{"failed units: a.service"}}},
			"web1: failed units: a.service"},
		{effects.Result{ExitCode: 3, Verdict: verdict.Verdict{Reasons: []string{"x"}}, Late: []string{"finalize: y"}},
			"web1: x; finalize: y"},
		{effects.Result{ExitCode: 3}, "web1: exit 3"},
	} {
		summary, detail := verdictFailure("web1", c.res)
		if detail != c.want || summary != "web1: verdict failed (exit "+string(rune('0'+c.res.ExitCode))+")" {
			t.Errorf("%+v: %q, %q; want detail %q", c.res, summary, detail, c.want)
		}
	}
}
