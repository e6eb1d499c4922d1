package effects

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// Observed is what a node runs and will boot, as its deployer last left it or as
// someone changed it since (issue 15 item 4: the OpenTofu provider's refresh reads
// it to see drift).
type Observed struct {
	Running string // /run/current-system resolved; "" when absent
	Profile string // the system profile resolved; "" when absent
	Boot    string // the toplevel of the default boot entry; "" when the node has none NixOS made
}

// observeScript prints, a line each, /run/current-system and the system profile
// resolved ("" when absent), then runs the boot entry script given as $0.
const observeScript = `for l in /run/current-system /nix/var/nix/profiles/system; do
	if [ -e "$l" ]; then readlink -f "$l"; else echo; fi
done
exec sh -c "$0"`

// Observe reads what the node runs, its system profile and its default boot entry
// in one command: not the verdict's whole read of systemd state, which a refresh
// of every node would pay for nothing. An error wraps ErrUnreachable when the node
// could not be reached.
func Observe(ctx context.Context, t Transport) (Observed, error) {
	var out, errOut bytes.Buffer
	code, err := t.Run(ctx, Command{Argv: []string{"sh", "-c", observeScript, BootEntryScript}, Stdout: &out, Stderr: &errOut,
		Path: []string{"/run/current-system/sw/bin"}})
	if err != nil {
		return Observed{}, fmt.Errorf("reading what the node runs: %w", err)
	}
	if code != 0 {
		return Observed{}, fmt.Errorf("reading what the node runs: exit %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	lines := strings.SplitN(out.String(), "\n", 3)
	if len(lines) < 3 {
		return Observed{}, fmt.Errorf("reading what the node runs: %d lines, want 3", len(lines))
	}
	return Observed{Running: strings.TrimSpace(lines[0]), Profile: strings.TrimSpace(lines[1]), Boot: bootToplevel(lines[2])}, nil
}

// Drift says how what a node was observed to run departs from toplevel, the
// generation its last deploy installed: "" when it does not. rebootPending: the last
// deploy installed toplevel for the next boot (switch-to-configuration exit 100), so
// the node running its previous generation is no drift. A value not observed ("")
// is no drift either.
func (o Observed) Drift(toplevel string, rebootPending bool) string {
	var parts []string
	if o.Running != "" && o.Running != toplevel && !rebootPending {
		parts = append(parts, "runs "+o.Running)
	}
	if o.Profile != "" && o.Profile != toplevel {
		parts = append(parts, "its system profile is "+o.Profile)
	}
	if o.Boot != "" && o.Boot != toplevel {
		parts = append(parts, "its boot entry boots "+o.Boot)
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ", ") + ", not " + toplevel
}
