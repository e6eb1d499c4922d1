package effects

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The lines switch-to-configuration-ng's dry-activate writes (its dry-run branch, as
// nixos-rebuild dry-activate relays them; the order and the ", "-joined, sorted lists
// as the Perl script it replaced printed them), and the test closures' imitation.
func TestParseDryActivate(t *testing.T) {
	for _, c := range []struct {
		name, out string
		want      DryActivation
	}{
		{"nixos-rebuild dry-activate on a NixOS host", `building the system configuration...
would stop the following units: accounts-daemon.service
would activate the configuration...
would reload the following units: dbus.service
would restart the following units: polkit.service
would start the following units: accounts-daemon.service
`, DryActivation{Stop: []string{"accounts-daemon.service"}, Reload: []string{"dbus.service"},
			Restart: []string{"polkit.service"}, Start: []string{"accounts-daemon.service"}}},
		{"several units, not restarted ones, systemd itself", `would stop the following units: echo.service, echo.socket
would NOT stop the following changed units: keeper.service
would activate the configuration...
setting up /etc...
would restart systemd
would restart the following units: nginx.service, sshd.service
would start the following units: echo.socket, new.service
`, DryActivation{Stop: []string{"echo.service", "echo.socket"}, NotStopped: []string{"keeper.service"},
			Restart: []string{"nginx.service", "sshd.service"}, Start: []string{"echo.socket", "new.service"}, RestartSystemd: true}},
		{"nothing to do", "would activate the configuration...\n", DryActivation{}},
		{"warnings and noise are not units", "warning: user services are not handled by this dry activation\nwould start the following units: \n", DryActivation{}},
	} {
		if d := cmp.Diff(c.want, ParseDryActivate(c.out), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("%s (-want +got)\n%s", c.name, d)
		}
	}
}
