package incus

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
	"github.com/switchyard-nix/switchyard/transports/node"
)

// The bootloader of a NixOS Incus instance (SPEC 5), as nixpkgs makes it.
//
// A container (nixos/modules/virtualisation/lxc-container.nix) has no boot loader:
// LXC starts the container's /sbin/init, and the module makes that link the boot entry.
//
//	initScript = if config.boot.initrd.systemd.enable then "prepare-root" else "init";
//	system.build.installBootLoader = pkgs.writeScript "install-lxc-sbin-init.sh" ''
//	  #!${pkgs.runtimeShell}
//	  ${pkgs.coreutils}/bin/ln -fs "$1/${initScript}" /sbin/init
//	'';
//	system.activationScripts.installInitScript = lib.mkForce ''
//	  ln -fs $systemConfig/${initScript} /sbin/init
//	'';
//	boot.postBootCommands = ''
//	  ...
//	  # nixos-rebuild also requires a "system" profile
//	  ${config.nix.package.out}/bin/nix-env -p /nix/var/nix/profiles/system --set /run/current-system
//	'';
//
// So /sbin/init is a symlink to `<toplevel>/init` (`<toplevel>/prepare-root` under a
// systemd initrd: nixos/modules/system/activation/top-level.nix copies stage 2 to
// $out/prepare-root and systemd itself to $out/init then, stage 2 to $out/init
// otherwise). switch-to-configuration repoints it before it activates anything
// (switch-to-configuration-ng's main: `if matches!(action, Action::Switch |
// Action::Boot) { do_install_bootloader(&install_bootloader, &toplevel)?; }`, before
// the `boot` action exits and before activation), and every activation repoints it
// again, to the generation being activated (installInitScript; at boot stage 2 runs
// the activation script of the system it boots). The system profile does not decide
// what a container boots: at every boot stage 2 runs boot.postBootCommands, which adds
// a generation of /nix/var/nix/profiles/system pointing at /run/current-system, that is
// at the system /sbin/init just booted.
//
// A virtual machine (nixos/modules/virtualisation/incus-virtual-machine.nix) boots with
// systemd-boot (`boot.loader.systemd-boot.enable = true`, an ESP at /boot): its boot
// entry is installed by `switch-to-configuration boot`, as on any NixOS host.

// sbinInit is the container's boot entry.
const sbinInit = "/sbin/init"

// FinalizeBootloader points the system profile and the boot entry at toplevel. A
// container: the system profile, then /sbin/init -> <toplevel>/init (prepare-root
// when the toplevel has one), as the container module's boot loader installer does. A
// VM: the system profile, then toplevel's own `switch-to-configuration boot`. Whether
// the instance is a VM is read from the Incus API, never taken from configuration.
func (t *Transport) FinalizeBootloader(ctx context.Context, toplevel string) error {
	vm, err := t.isVM(ctx)
	if err != nil {
		return fmt.Errorf("finalize: %w", err)
	}
	return finalizeBoot(ctx, t, vm, toplevel)
}

// RevertBootloader points the boot entry back at the running generation (what
// /run/current-system resolves to): in a container /sbin/init -> <running>/init
// (never a link through /run, which is empty when the container starts); in a VM the
// running generation's own `switch-to-configuration boot`. The system profile is
// left alone: only FinalizeBootloader sets it.
func (t *Transport) RevertBootloader(ctx context.Context) error {
	vm, err := t.isVM(ctx)
	if err != nil {
		return fmt.Errorf("revert bootloader: %w", err)
	}
	return revertBoot(ctx, t, vm)
}

// isVM tells whether the instance is a virtual machine, as the Incus API says
// (an instance's type never changes: it is asked once).
func (t *Transport) isVM(ctx context.Context) (bool, error) {
	t.mu.Lock()
	kind := t.kind
	t.mu.Unlock()
	if kind == "" {
		rctx, cancel := context.WithTimeout(ctx, node.ReadTimeout)
		inst, err := t.c.Instance(rctx, t.cfg.Project, t.cfg.Instance)
		cancel()
		if err != nil {
			return false, t.classify(ctx, err, "reading the instance's type")
		}
		kind = inst.Type
		if kind == "" {
			kind = api.TypeContainer
		}
		t.mu.Lock()
		t.kind = kind
		t.mu.Unlock()
	}
	switch kind {
	case api.TypeContainer:
		return false, nil
	case api.TypeVM:
		return true, nil
	}
	return false, fmt.Errorf("%s: instance type %q is neither %q nor %q", t.Target(), kind, api.TypeContainer, api.TypeVM)
}

// runner runs one command on the node: the Transport, or a fake in tests.
type runner interface {
	Run(ctx context.Context, cmd effects.Command) (int, error)
}

// finalizeBoot is FinalizeBootloader for an instance known to be a VM or a container.
func finalizeBoot(ctx context.Context, r runner, vm bool, toplevel string) error {
	if !strings.HasPrefix(toplevel, "/") {
		return fmt.Errorf("finalize: toplevel %q is not a store path", toplevel)
	}
	path := []string{toplevel + "/sw/bin"}
	if err := node.Step(ctx, r, "set the system profile", path, "nix-env", "-p", node.SystemProfile, "--set", toplevel); err != nil {
		return err
	}
	if vm {
		return node.Step(ctx, r, "install the boot entry", path, toplevel+"/bin/switch-to-configuration", "boot")
	}
	init, err := initOf(ctx, r, toplevel)
	if err != nil {
		return fmt.Errorf("install the boot entry: %w", err)
	}
	return node.Step(ctx, r, "install the boot entry: point "+sbinInit+" at "+init, nil, "ln", "-sfn", init, sbinInit)
}

// revertBoot is RevertBootloader for an instance known to be a VM or a container.
func revertBoot(ctx context.Context, r runner, vm bool) error {
	var out strings.Builder
	rctx, cancel := context.WithTimeout(ctx, node.ReadTimeout)
	defer cancel()
	code, err := r.Run(rctx, effects.Command{Argv: []string{"readlink", "-e", "/run/current-system"}, Stdout: &out})
	if err != nil {
		return fmt.Errorf("revert bootloader: read /run/current-system: %w", err)
	}
	running := strings.TrimSpace(out.String())
	if code != 0 || !strings.HasPrefix(running, "/") {
		return errors.New("revert bootloader: /run/current-system is missing on the node: no running generation to revert to")
	}
	if vm {
		return node.Step(ctx, r, "revert bootloader: switch-to-configuration boot of the running generation",
			[]string{running + "/sw/bin"}, running+"/bin/switch-to-configuration", "boot")
	}
	init, err := initOf(ctx, r, running)
	if err != nil {
		return fmt.Errorf("revert bootloader: %w", err)
	}
	return node.Step(ctx, r, "revert bootloader: point "+sbinInit+" at the running generation's "+init, nil, "ln", "-sfn", init, sbinInit)
}

// initOf is the program of toplevel that /sbin/init must name: <toplevel>/prepare-root
// when it exists (a system with a systemd initrd, where <toplevel>/init is systemd
// itself), else <toplevel>/init. A toplevel with neither is refused rather than
// linked: a dangling /sbin/init does not boot.
func initOf(ctx context.Context, r runner, toplevel string) (string, error) {
	for _, name := range []string{"prepare-root", "init"} {
		p := toplevel + "/" + name
		rctx, cancel := context.WithTimeout(ctx, node.ReadTimeout)
		code, err := r.Run(rctx, effects.Command{Argv: []string{"test", "-e", p}})
		cancel()
		if err != nil {
			return "", fmt.Errorf("look for %s: %w", p, err)
		}
		switch code {
		case 0:
			return p, nil
		case 1:
			continue
		}
		return "", fmt.Errorf("look for %s: test exited %d", p, code)
	}
	return "", fmt.Errorf("%s has neither init nor prepare-root: not a NixOS system; %s left as it is", toplevel, sbinInit)
}
