package effects_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
)

// SwitchWaitScript on a real node (systemd 252): it waits for a transient oneshot
// unit to end, prints its properties and reads /run/current-system, and leaves the
// unit loaded (a second read after a dropped connection reads the same); a unit
// still running at the bound and an unknown unit are printed as they are.
func TestSwitchWaitScriptOnNode(t *testing.T) {
	node := testbed.Require(t).Node(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wait := func(unit, boundMS string) (map[string]string, time.Duration) {
		t.Helper()
		start := time.Now()
		out, err := node.Exec(ctx, "sh", "-c", effects.SwitchWaitScript, "sh", unit, boundMS)
		if err != nil {
			t.Fatalf("%s: %v", unit, err)
		}
		props := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			k, v, _ := strings.Cut(line, "=")
			props[k] = v
		}
		return props, time.Since(start)
	}
	loadState := func(unit string) string {
		return strings.TrimSpace(node.MustExec(t, "systemctl", "show", "-P", "LoadState", "--", unit))
	}
	start := func(unit, script string) {
		node.MustExec(t, "systemd-run", "--unit="+unit, "--service-type=oneshot", "--property=RemainAfterExit=yes",
			"--no-block", "--quiet", "--", "sh", "-c", script)
	}
	current := strings.TrimSpace(node.MustExec(t, "readlink", "-f", "/run/current-system"))

	// It returns once the main process exits (tail --pid), not at the next poll.
	start("sw-ok", "sleep 3")
	cpu0, _ := testbed.InstanceCPU(node.Name)
	p, took := wait("sw-ok", "20000")
	cpu1, _ := testbed.InstanceCPU(node.Name)
	t.Logf("waiting %s for a 3 s switch cost the node %s of CPU", took.Round(time.Millisecond), (cpu1 - cpu0).Round(time.Millisecond))
	if p["ActiveState"] != "active" || p["ExecMainCode"] != "1" || p["ExecMainStatus"] != "0" || p["current"] != current ||
		took < 2700*time.Millisecond || took > 4500*time.Millisecond {
		t.Errorf("sw-ok after %s: %v (want active, status 0, current=%s)", took, p, current)
	}
	if again, _ := wait("sw-ok", "20000"); again["ExecMainStatus"] != "0" || again["current"] != current || loadState("sw-ok") != "loaded" {
		t.Errorf("sw-ok read again: %v, unit %s (want the same result, the unit still loaded)", again, loadState("sw-ok"))
	}
	node.MustExec(t, "systemctl", "stop", "sw-ok")

	start("sw-fail", "exit 4")
	p, _ = wait("sw-fail", "20000")
	if p["ActiveState"] != "failed" || p["ExecMainStatus"] != "4" || p["current"] != current {
		t.Errorf("sw-fail: %v", p)
	}
	node.MustExec(t, "systemctl", "reset-failed", "sw-fail")

	start("sw-slow", "sleep 60")
	p, took = wait("sw-slow", "600")
	if p["ActiveState"] != "activating" || p["LoadState"] != "loaded" || took < 600*time.Millisecond || took > 10*time.Second {
		t.Errorf("sw-slow after %s: %v (want activating at the bound)", took, p)
	}
	if _, ok := p["current"]; ok {
		t.Errorf("sw-slow: a unit still running is not followed by current: %v", p)
	}
	if s := loadState("sw-slow"); s != "loaded" {
		t.Errorf("sw-slow is %s, want still loaded", s)
	}
	node.MustExec(t, "systemctl", "stop", "sw-slow")

	p, took = wait("sw-never", "20000")
	if p["LoadState"] != "not-found" || took > 10*time.Second {
		t.Errorf("sw-never after %s: %v", took, p)
	}
	if _, ok := p["current"]; ok {
		t.Errorf("sw-never: %v", p)
	}
}

// LockScript's acquire on a real node: it takes a free lock in one command, reads a
// held one without touching it, and leaves a free lock alone while a switch unit
// runs (a killed deployer's switch).
func TestLockAcquireOnNode(t *testing.T) {
	node := testbed.Require(t).Node(t)
	lock := func(args ...string) string {
		t.Helper()
		return node.MustExec(t, append([]string{"sh", "-c", effects.LockScript, "sh"}, args...)...)
	}
	onNode := func() string {
		out, _ := node.Exec(context.Background(), "cat", "/run/switchyard/lock")
		return strings.TrimSpace(out)
	}
	out := lock("acquire", "ci-1", "10", "60", "-")
	line, ok := strings.CutPrefix(strings.TrimSpace(out), "taken ")
	f := strings.Fields(line)
	if !ok || len(f) != 6 || f[0] != "1" || f[2] != "ci-1" || f[3] != "10" || f[5] != "-" || onNode() != line {
		t.Fatalf("acquire of a free lock printed %q; the node holds %q", out, onNode())
	}
	out = lock("acquire", "ci-2", "20", "60", "-")
	if !strings.Contains(out, "now ") || !strings.Contains(out, "lock "+line+"\n") || strings.Contains(out, "taken") || onNode() != line {
		t.Errorf("acquire of a held lock printed %q; the node holds %q, want %q untouched", out, onNode(), line)
	}
	lock("release", f[0])

	node.MustExec(t, "systemd-run", "--unit=switchyard-switch-42", "--quiet", "--", "sleep", "60")
	out = lock("acquire", "ci-2", "20", "60", "-")
	if !strings.Contains(out, "lock \n") || !strings.Contains(out, "switch switchyard-switch-42.service active running") || onNode() != "" {
		t.Errorf("acquire with a switch unit running printed %q; the node holds %q, want no lock", out, onNode())
	}
	node.MustExec(t, "systemctl", "stop", "switchyard-switch-42.service")
	out = lock("acquire", "ci-2", "20", "60", "-")
	if !strings.HasPrefix(out, "taken 2 ") {
		t.Errorf("acquire once the switch unit ended printed %q", out)
	}
}

// OwnedScript on a real node: the unit directory listed through its symlinks and the
// fstab read whole in one command, an fstab line that looks like a marker included; a
// toplevel without either reads as empty; a symlink loop in the unit directory and an
// fstab that cannot be read fail, named by their part and with the command's stderr.
func TestOwnedScriptOnNode(t *testing.T) {
	node := testbed.Require(t).Node(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fstab := "# data\n/dev/vdb /data ext4 defaults 0 2\n##switchyard-owned fstab\n##switchyard-owned end\n"
	node.MustExec(t, "sh", "-c", `set -e
mkdir -p /tmp/own/store /tmp/own/full/etc/systemd/system/multi-user.target.wants /tmp/own/none /tmp/own/loop/etc/systemd/system /tmp/own/badtab/etc/fstab
echo '[Service]' > /tmp/own/store/b.service
echo '[Service]' > /tmp/own/full/etc/systemd/system/a.service
ln -s /tmp/own/store/b.service /tmp/own/full/etc/systemd/system/b.service
ln -s ../a.service /tmp/own/full/etc/systemd/system/multi-user.target.wants/a.service
printf '%s' "$1" > /tmp/own/full/etc/fstab
ln -s loop.service /tmp/own/loop/etc/systemd/system/loop.service`, "sh", fstab)
	run := func(top string) (string, int, string) {
		out, err := node.Exec(ctx, effects.OwnedArgv(top)...)
		var exit *testbed.ExitError
		switch {
		case err == nil:
			return out, 0, ""
		case errors.As(err, &exit):
			return out, exit.Code, exit.Stderr
		}
		t.Fatalf("%s: %v", top, err)
		return "", 0, ""
	}

	out, code, _ := run("/tmp/own/full")
	units, tab, failed, ok := effects.SplitOwned(out)
	wantUnits := []string{"d multi-user.target.wants", "f a.service", "f b.service", "f multi-user.target.wants/a.service"}
	got := strings.Split(strings.TrimSpace(units), "\n")
	slices.Sort(got)
	if code != 0 || !ok || failed != "" || !slices.Equal(got, wantUnits) || tab != fstab {
		t.Errorf("full toplevel: exit %d ok %v failed %q units %q fstab %q; want units %q and the fstab as written", code, ok, failed, got, tab, wantUnits)
	}

	out, code, _ = run("/tmp/own/none")
	if units, tab, _, ok := effects.SplitOwned(out); code != 0 || !ok || units != "" || tab != "" {
		t.Errorf("toplevel without units or fstab: exit %d ok %v units %q fstab %q; want both empty", code, ok, units, tab)
	}

	out, code, stderr := run("/tmp/own/loop")
	if _, _, failed, ok := effects.SplitOwned(out); code == 0 || ok || failed != "units" || !strings.Contains(stderr, "loop.service") {
		t.Errorf("symlink loop: exit %d ok %v failed %q stderr %q; want the units part failed, naming loop.service", code, ok, failed, stderr)
	}

	out, code, stderr = run("/tmp/own/badtab")
	if _, _, failed, ok := effects.SplitOwned(out); code == 0 || ok || failed != "fstab" || !strings.Contains(stderr, "fstab") {
		t.Errorf("fstab a directory: exit %d ok %v failed %q stderr %q; want the fstab part failed", code, ok, failed, stderr)
	}
}

// BootEntryScript on a real node for the loaders the test bed does not boot (issue
// 32): GRUB's grub.cfg as install-grub.pl writes it (the default entry first, then
// the submenu of every generation), and a NixOS system without a boot loader (a test
// VM, a nixos-container), whose boot entry is the system profile's init.
func TestBootEntryScriptOnNode(t *testing.T) {
	node := testbed.Require(t).Node(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	read := func() string {
		t.Helper()
		out, err := node.Exec(ctx, "sh", "-c", effects.BootEntryScript)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	const def, older = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-nixos-system-web1-26.05", "/nix/store/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-nixos-system-web1-26.05"
	grub := `# Automatically generated.  DO NOT EDIT THIS FILE!
set timeout=5
if [ -s $prefix/grubenv ]; then
  load_env
fi
set default=0
search --set=drive1 --fs-uuid 0c8a-1b2c
menuentry "NixOS - Default" {
  search --set=drive1 --fs-uuid 0c8a-1b2c
  linux ($drive1)//kernels/x-linux-6.12-bzImage init=` + def + `/init loglevel=4
  initrd ($drive1)//kernels/y-initrd-linux-6.12-initrd
}

submenu "NixOS - All configurations" --class submenu {
menuentry "NixOS - Configuration 2 (2026-12-01 - 26.05)" --class nixos {
  linux ($drive1)//kernels/x-linux-6.12-bzImage init=` + older + `/init loglevel=4
  initrd ($drive1)//kernels/y-initrd-linux-6.12-initrd
}
}
`
	node.MustExec(t, "sh", "-c", `mkdir -p /boot/grub && cat >/boot/grub/grub.cfg`+"<<'EOF'\n"+grub+"EOF\n")
	if got := read(); got != def+"/init" {
		t.Errorf("GRUB: %q, want the default entry's %s/init", got, def)
	}
	node.MustExec(t, "rm", "-r", "/boot/grub")

	// No boot loader: /sbin/init is no NixOS link either.
	const top = "/nix/store/cccccccccccccccccccccccccccccccc-nixos-system-web1-26.05"
	node.MustExec(t, "sh", "-c", "mv /sbin/init /sbin/init.away && touch /etc/NIXOS && mkdir -p /nix/var/nix/profiles && ln -sfn "+top+" /nix/var/nix/profiles/system")
	t.Cleanup(func() { node.Exec(context.Background(), "mv", "/sbin/init.away", "/sbin/init") })
	if got := read(); got != top+"/init" {
		t.Errorf("no boot loader: %q, want the system profile's %s/init", got, top)
	}
	node.MustExec(t, "rm", "/etc/NIXOS")
	if got := read(); got != "" {
		t.Errorf("not NixOS, no boot loader: %q, want nothing", got)
	}
}
