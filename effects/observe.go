package effects

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/switchyard-nix/switchyard/verdict"
)

// Observed is what a node runs and will boot, as its deployer last left it or as
// someone changed it since (issue 15 item 4: the OpenTofu provider's refresh reads
// it to see drift).
type Observed struct {
	Running string // /run/current-system resolved; "" when absent
	Profile string // the system profile resolved; "" when absent
	Boot    string // the toplevel of the default boot entry; "" when the node has none NixOS made
}

// Observe reads what the node runs, its system profile and its default boot entry,
// in two commands (the verdict's read and BootEntryScript). An error wraps
// ErrUnreachable when the node could not be reached.
func Observe(ctx context.Context, t Transport) (Observed, error) {
	path := []string{"/run/current-system/sw/bin"}
	s, err := verdict.Read(ctx, func(ctx context.Context, argv []string, stdout io.Writer) (int, error) {
		return t.Run(ctx, Command{Argv: argv, Stdout: stdout, Path: path})
	})
	if err != nil {
		return Observed{}, err
	}
	var out, errOut bytes.Buffer
	code, err := t.Run(ctx, Command{Argv: []string{"sh", "-c", BootEntryScript}, Stdout: &out, Stderr: &errOut, Path: path})
	if err != nil {
		return Observed{}, fmt.Errorf("reading the boot entry: %w", err)
	}
	if code != 0 {
		return Observed{}, fmt.Errorf("reading the boot entry: exit %d: %s", code, strings.TrimSpace(errOut.String()))
	}
	return Observed{Running: s.CurrentSystem, Profile: s.BootEntry, Boot: bootToplevel(out.String())}, nil
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
