package vm_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/testbed/vm"
)

// The VM tier's tests: the real switchyard binary deploys test closures over SSH to a
// qemu VM that boots through a real bootloader (extlinux), for what containers cannot
// show: the boot entry a deploy leaves is what the machine boots after a reboot, and a
// switch may restart sshd and the network under the deploy's own connection. One VM
// serves the four cases in turn (each VM boot costs a minute or more under TCG): each
// case starts from whatever generation the one before left running.

var binary string

func TestMain(m *testing.M) { os.Exit(testbed.RunWithSwitchyard(m, &binary)) }

// deploy runs `switchyard deploy` of toplevel to the VM over SSH with its pinned host
// key and returns the exit code and the verdict event. The verdict windows are short,
// the wait for the node long (TCG is slow).
func deploy(t *testing.T, m *vm.VM, toplevel string, env ...string) (int, map[string]any) {
	t.Helper()
	return deployWith(t, m, toplevel, nil, env...)
}

// deployWith is deploy with more of switchyard deploy's flags.
func deployWith(t *testing.T, m *vm.VM, toplevel string, args []string, env ...string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, append([]string{"deploy", "--node", "vm1", "--target", m.Target(),
		"--known-hosts", m.KnownHosts, "--ssh-key", m.KeyFile, "--toplevel", toplevel, "--output", "json"}, args...)...)
	cmd.Env = append(append(os.Environ(), "DEPLOY_SETTLE_ATTEMPTS=5", "DEPLOY_CYCLE_INTERVAL=1",
		"DEPLOY_CYCLE_WINDOWS=3", "DEPLOY_WAIT_TIMEOUT=120"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run switchyard: %v", err)
	}
	t.Logf("switchyard deploy %s: exit %d in %s", filepath.Base(toplevel), code, time.Since(start).Round(time.Second))
	var verdict map[string]any
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("stdout line is not JSON: %q", sc.Text())
		}
		if e["kind"] == "verdict" {
			verdict = e
		}
	}
	if verdict == nil {
		t.Fatalf("no verdict event (exit %d); stderr:\n%s", code, stderr.String())
	}
	t.Logf("phases (ms): %v", verdict["phases_ms"])
	if code != 0 && stderr.Len() > 0 {
		t.Logf("switchyard stderr:\n%s", stderr.String())
	}
	return code, verdict
}

func switchResult(v map[string]any) (string, float64) {
	sw, _ := v["switch"].(map[string]any)
	res, _ := sw["result"].(string)
	code, _ := sw["exit_code"].(float64)
	return res, code
}

// wantBoot checks what the guest booted and will boot: all of it the generation top.
func wantBoot(t *testing.T, b vm.Boot, top string) {
	t.Helper()
	if got := b.DefaultInit(); got != top+"/init" {
		t.Errorf("extlinux.conf DEFAULT boots init=%q, want %s/init:\n%s", got, top, b.Extlinux)
	}
	if b.Booted != top {
		t.Errorf("/run/booted-system -> %q, want %s", b.Booted, top)
	}
	if b.Current != top {
		t.Errorf("/run/current-system -> %q, want %s", b.Current, top)
	}
	if got := b.CmdlineInit(); got != top+"/init" {
		t.Errorf("/proc/cmdline init=%q, want %s/init (cmdline %q)", got, top, b.Cmdline)
	}
	// extlinux loaded the kernel its entry names (it sets BOOT_IMAGE).
	if !strings.Contains(b.Cmdline, "BOOT_IMAGE=/boot/vmlinuz-") {
		t.Errorf("/proc/cmdline %q: not booted by extlinux from /boot", b.Cmdline)
	}
}

func TestVM(t *testing.T) {
	img := vm.Require(t)
	m := img.Launch(t)
	first := m.Boot(t)
	if first.Booted != "" || first.DefaultInit() != "" {
		t.Fatalf("a fresh VM booted a generation (%q, next %q); want Debian as installed", first.Booted, first.DefaultInit())
	}

	// 1. A confirmed switch, then a reboot: the VM comes up on the new generation, from
	// the boot entry finalize wrote (DEFAULT, and the system profile's generation 1).
	var good string
	t.Run("ConfirmedSwitchThenReboot", func(t *testing.T) {
		top := testbed.BuildClosure(t, "healthy", "vm")
		code, v := deploy(t, m, top)
		if res, sc := switchResult(v); code != 0 || v["ok"] != true || res != "ok" || sc != 0 {
			t.Fatalf("deploy: exit %d, verdict %v", code, v)
		}
		if v["boot_entry"] != top || v["toplevel"] != top {
			t.Errorf("verdict toplevel %v, boot_entry %v; want %s", v["toplevel"], v["boot_entry"], top)
		}
		before := m.Boot(t)
		t.Logf("extlinux.conf after finalize:\n%s", before.Extlinux)
		if got := before.DefaultInit(); got != top+"/init" {
			t.Fatalf("after finalize extlinux.conf DEFAULT boots init=%q, want %s/init:\n%s", got, top, before.Extlinux)
		}
		if got := vm.ExtlinuxEntries(before.Extlinux)["nixos-1"]; !strings.Contains(got, "init="+top+"/init ") {
			t.Errorf("no entry for system profile generation 1 (%s): %q", top, got)
		}
		m.Reboot(t)
		after := m.Boot(t)
		t.Logf("after the reboot: booted %s, cmdline %q", after.Booted, after.Cmdline)
		wantBoot(t, after, top)
		if st := strings.TrimSpace(m.MustExec(t, "systemctl", "show", "--property=ActiveState", "--value", "hello.service")); st != "active" {
			t.Errorf("hello.service is %s after the reboot, want active (started at boot from the generation's units)", st)
		}
		// The rebooted node, judged as it runs.
		code, v = deploy(t, m, top, "DEPLOY_VERDICT_ONLY=1")
		if code != 0 || v["ok"] != true || v["toplevel"] != top || v["pass"] != "verdict-only" {
			t.Errorf("verdict-only pass after the reboot: exit %d, %v", code, v)
		}
		if !t.Failed() {
			good = top
		}
	})

	// 2. A switch that installs its boot entry and never activates: switchyard reverts the
	// boot entry to the running generation, and after a reboot the VM is still on it.
	t.Run("NeverConfirmedThenReboot", func(t *testing.T) {
		running := m.Boot(t).Current
		if running == "" {
			t.Fatalf("no running generation to revert to (the case before failed)")
		}
		bad := testbed.BuildClosure(t, "never-activates-after-boot-entry", "vm")
		code, v := deploy(t, m, bad)
		if res, _ := switchResult(v); code != 1 || v["ok"] != false || res != "never-confirmed" {
			t.Fatalf("deploy: exit %d, verdict %v; want exit 1, switch never-confirmed", code, v)
		}
		if v["boot_entry"] != running {
			t.Errorf("boot_entry %v, want the running generation %s", v["boot_entry"], running)
		}
		reverted := m.Boot(t)
		if got := reverted.DefaultInit(); got != running+"/init" {
			t.Fatalf("after the revert extlinux.conf DEFAULT boots init=%q, want %s/init:\n%s", got, running, reverted.Extlinux)
		}
		if strings.Contains(reverted.Extlinux, bad) {
			t.Errorf("extlinux.conf still names the never-activated %s:\n%s", bad, reverted.Extlinux)
		}
		if got := m.Readlink(t, "/nix/var/nix/profiles/system"); got != running {
			t.Errorf("system profile -> %q, want the running generation %s", got, running)
		}
		m.Reboot(t)
		after := m.Boot(t)
		t.Logf("after the reboot: booted %s, cmdline %q", after.Booted, after.Cmdline)
		wantBoot(t, after, running)
		if good != "" && running != good {
			t.Errorf("running %s before the deploy, want the generation of the case before, %s", running, good)
		}
	})

	// 3. The activation restarts sshd and the network (systemd-networkd) under the
	// deploy's own SSH connection: the verdict is still read and right.
	t.Run("SwitchRestartsSSHAndNetwork", func(t *testing.T) {
		previous := m.Boot(t).Current
		invocation := func(unit string) string {
			return strings.TrimSpace(m.MustExec(t, "systemctl", "show", "--property=InvocationID", "--value", unit))
		}
		sshBefore, netBefore := invocation("ssh.service"), invocation("systemd-networkd.service")
		top := testbed.BuildClosure(t, "restarts-ssh-and-network", "vm")
		code, v := deploy(t, m, top)
		res, sc := switchResult(v)
		if code != 0 || v["ok"] != true || v["exit_code"] != 0.0 || res != "ok" || sc != 0 || v["reachable"] != true {
			t.Fatalf("deploy: exit %d, verdict %v", code, v)
		}
		if v["toplevel"] != top || v["boot_entry"] != top || v["previous"] != previous || v["pass"] != "deploy" {
			t.Errorf("verdict toplevel %v boot_entry %v previous %v pass %v; want %s, %s, %s, deploy",
				v["toplevel"], v["boot_entry"], v["previous"], v["pass"], top, top, previous)
		}
		if v["system_state"] != "running" {
			t.Errorf("system_state %v, want running", v["system_state"])
		}
		if units, _ := v["units"].(map[string]any); units == nil || fmt.Sprint(units["failed"]) != "[]" {
			t.Errorf("units %v, want no failed unit", v["units"])
		}
		if after := invocation("ssh.service"); after == sshBefore {
			t.Errorf("ssh.service was not restarted by the switch (invocation %s)", after)
		}
		if after := invocation("systemd-networkd.service"); after == netBefore {
			t.Errorf("systemd-networkd.service was not restarted by the switch (invocation %s)", after)
		}
		if got := m.Boot(t).DefaultInit(); got != top+"/init" {
			t.Errorf("extlinux.conf DEFAULT boots init=%q, want %s/init", got, top)
		}
	})

	// 4. Issue 30: the activation moves sshd to another port. The deploy's own connection
	// survives it, the fresh one the confirmation needs is refused, so the VM switches
	// itself back after DEPLOY_CONFIRM_TIMEOUT (profile and extlinux entry too), takes
	// new connections again, and a reboot comes up on the previous generation.
	t.Run("MovedSSHPortRollsBack", func(t *testing.T) {
		previous := m.Boot(t).Current
		if previous == "" {
			t.Fatalf("no running generation to roll back to (the case before failed)")
		}
		top := testbed.BuildClosure(t, "moves-ssh-port", "vm")
		code, v := deploy(t, m, top, "DEPLOY_CONFIRM_TIMEOUT=15")
		if res, _ := switchResult(v); code != 1 || v["ok"] != false || res != "rolled-back" {
			t.Fatalf("deploy: exit %d, verdict %v; want exit 1, switch rolled-back", code, v)
		}
		if v["boot_entry"] != previous {
			t.Errorf("boot_entry %v, want the previous generation %s", v["boot_entry"], previous)
		}
		// m.Exec opens a new connection to port 22.
		rolled := m.Boot(t)
		if rolled.Current != previous || rolled.DefaultInit() != previous+"/init" {
			t.Errorf("after the rollback /run/current-system -> %q, extlinux.conf DEFAULT init=%q; want %s:\n%s",
				rolled.Current, rolled.DefaultInit(), previous, rolled.Extlinux)
		}
		if got := m.Readlink(t, "/nix/var/nix/profiles/system"); got != previous {
			t.Errorf("system profile -> %q, want %s", got, previous)
		}
		m.Reboot(t)
		after := m.Boot(t)
		t.Logf("after the reboot: booted %s, cmdline %q", after.Booted, after.Cmdline)
		wantBoot(t, after, previous)
	})

	// 5. deploy --reboot (apply --reboot's body): the deploy reboots the VM itself
	// through extlinux, waits for its new boot id, checks /run/booted-system and judges
	// the booted generation with a verdict-only pass, whose verdict comes last. Runs
	// from any generation (alone: -run 'TestVM/DeployReboot').
	t.Run("DeployRebootJudgesTheBootedGeneration", func(t *testing.T) {
		before := m.Boot(t)
		top := testbed.BuildClosure(t, "healthy", "vm-reboot")
		code, v := deployWith(t, m, top, []string{"--reboot", "--reboot-timeout", "10m"})
		if code != 0 || v["ok"] != true || v["toplevel"] != top || v["pass"] != "verdict-only" {
			t.Fatalf("deploy --reboot: exit %d, last verdict %v; want 0, ok, %s, verdict-only", code, v, top)
		}
		after := m.Boot(t)
		t.Logf("after deploy --reboot: boot id %s (was %s), booted %s, cmdline %q", after.ID, before.ID, after.Booted, after.Cmdline)
		if after.ID == before.ID {
			t.Errorf("boot id still %s: the VM did not reboot", before.ID)
		}
		wantBoot(t, after, top)
	})
}
