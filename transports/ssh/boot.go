package ssh

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// systemProfile is the NixOS system profile.
const systemProfile = "/nix/var/nix/profiles/system"

// FinalizeBootloader points the system profile at toplevel, then installs the
// boot entry with toplevel's own switch-to-configuration boot.
func (t *Transport) FinalizeBootloader(ctx context.Context, toplevel string) error {
	if !strings.HasPrefix(toplevel, "/") {
		return fmt.Errorf("finalize: toplevel %q is not a store path", toplevel)
	}
	path := []string{toplevel + "/sw/bin"}
	if err := t.step(ctx, "set the system profile", path, "nix-env", "-p", systemProfile, "--set", toplevel); err != nil {
		return err
	}
	return t.step(ctx, "install the boot entry", path, toplevel+"/bin/switch-to-configuration", "boot")
}

// RevertBootloader points the boot entry back at the running generation, with
// that generation's own switch-to-configuration boot.
func (t *Transport) RevertBootloader(ctx context.Context) error {
	var out, errOut strings.Builder
	code, err := t.Run(ctx, effects.Command{Argv: []string{"readlink", "-e", "/run/current-system"}, Stdout: &out, Stderr: &errOut})
	if err != nil {
		return fmt.Errorf("revert bootloader: read /run/current-system: %w", err)
	}
	running := strings.TrimSpace(out.String())
	if code != 0 || !strings.HasPrefix(running, "/") {
		return fmt.Errorf("revert bootloader: /run/current-system is missing on the node: no running generation to revert to")
	}
	return t.step(ctx, "revert bootloader: switch-to-configuration boot of the running generation",
		[]string{running + "/sw/bin"}, running+"/bin/switch-to-configuration", "boot")
}

// step runs one command of a bootloader hook; its error names the step, the exit
// status and the last line of stderr.
func (t *Transport) step(ctx context.Context, what string, path []string, argv ...string) error {
	var errOut stream.Tail
	code, err := t.Run(ctx, effects.Command{Argv: argv, Stderr: &errOut, Path: path})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		msg := fmt.Sprintf("%s: %s exited %d", what, argv[0], code)
		if last := errOut.LastLine(); last != "" {
			msg += ": " + last
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}
