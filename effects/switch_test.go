package effects

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The switch's unit is bounded by TimeoutStartSec= (RuntimeMaxSec= does not bound a
// oneshot), after the transport's own options so the body's bound wins.
func TestSwitchArgvBoundsTheOneshot(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		extra   []string
		want    string
	}{
		{900 * time.Second, nil, "--property=TimeoutStartSec=900000ms"},
		{2500 * time.Millisecond, []string{"--property=TimeoutStartSec=1"}, "--property=TimeoutStartSec=2500ms"},
	} {
		argv := switchArgv("u", "/nix/store/x", "switch", c.timeout, c.extra)
		i := strings.Index(strings.Join(argv, " "), c.want)
		last := -1
		for j, a := range argv {
			if strings.HasPrefix(a, "--property=TimeoutStartSec=") {
				last = j
			}
		}
		if i < 0 || argv[last] != c.want || argv[last+1] != "--" || !slices.Contains(argv, "--service-type=oneshot") {
			t.Errorf("switchArgv(%s, %q) = %q, want %s last before --", c.timeout, c.extra, argv, c.want)
		}
	}
}

func TestBootToplevel(t *testing.T) {
	for in, want := range map[string]string{
		"/nix/store/abc-nixos-system-x/init\n":       "/nix/store/abc-nixos-system-x",
		"/nix/store/abc-nixos-system-x/prepare-root": "/nix/store/abc-nixos-system-x",
		"/usr/lib/systemd/systemd\n":                 "",
		"":                                           "",
		"/nix/store/abc-systemd/lib/systemd/systemd": "",
	} {
		if got := bootToplevel(in); got != want {
			t.Errorf("bootToplevel(%q) = %q, want %q", in, got, want)
		}
	}
}
