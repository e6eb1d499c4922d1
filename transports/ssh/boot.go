package ssh

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/node"
)

// FinalizeBootloader points the system profile at toplevel, then installs the
// boot entry with toplevel's own switch-to-configuration boot, in one command
// (node.Finalize).
func (t *Transport) FinalizeBootloader(ctx context.Context, toplevel string) error {
	if !strings.HasPrefix(toplevel, "/") {
		return fmt.Errorf("finalize: toplevel %q is not a store path", toplevel)
	}
	return node.Finalize(ctx, t, toplevel)
}

// RevertBootloader points the boot entry back at the running generation, with
// that generation's own switch-to-configuration boot.
func (t *Transport) RevertBootloader(ctx context.Context) error {
	var out, errOut strings.Builder
	rctx, cancel := context.WithTimeout(ctx, node.ReadTimeout)
	defer cancel()
	code, err := t.Run(rctx, effects.Command{Argv: []string{"readlink", "-e", "/run/current-system"}, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return fmt.Errorf("revert bootloader: read /run/current-system: %w", err)
	}
	running := strings.TrimSpace(out.String())
	if code != 0 || !strings.HasPrefix(running, "/") {
		return fmt.Errorf("revert bootloader: /run/current-system is missing on the node: no running generation to revert to")
	}
	return node.Step(ctx, t, "revert bootloader: switch-to-configuration boot of the running generation",
		[]string{running + "/sw/bin"}, running+"/bin/switch-to-configuration", "boot")
}
