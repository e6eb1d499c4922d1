package verdict_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/verdict"
)

// ParseSwitchLog reads ng's unit messages (switch-to-configuration-ng's main.rs prints
// them sorted, ", "-separated) and nothing else of the journal.
func TestParseSwitchLog(t *testing.T) {
	journal := `stopping the following units: echo.service, echo.socket
NOT restarting the following changed units: keeper.service, Xorg.service
activating the configuration...
setting up /etc...
restarting the following units: mnt-data.mount
starting the following units: echo.socket
the following new units were started: hello.service
warning: the following units failed: broken.service
NOT restarting the following changed units: keeper.service
`
	want := verdict.SwitchLog{
		NotRestarted: []string{"keeper.service", "Xorg.service"},
		Stopped:      []string{"echo.service", "echo.socket"},
		Started:      []string{"mnt-data.mount", "echo.socket"},
	}
	if diff := cmp.Diff(want, verdict.ParseSwitchLog(journal)); diff != "" {
		t.Errorf("ParseSwitchLog (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(verdict.SwitchLog{}, verdict.ParseSwitchLog("")); diff != "" {
		t.Errorf("an empty journal (-want +got):\n%s", diff)
	}
}
