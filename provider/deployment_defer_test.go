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
}
