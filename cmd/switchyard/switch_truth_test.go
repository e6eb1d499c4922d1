package main_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// switchUnits lists the switchyard-switch-* units systemd still knows on the node.
func switchUnits(t *testing.T, node *testbed.Node) []string {
	t.Helper()
	out := node.MustExec(t, "systemctl", "list-units", "--all", "--plain", "--no-legend", "switchyard-switch-*")
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// bootInit is what the container boots: /sbin/init resolved (nixpkgs'
// lxc-container.nix makes it the boot entry).
func bootInit(t *testing.T, node *testbed.Node) string {
	t.Helper()
	return node.Readlink(t, "/sbin/init")
}

// Issue 11 item 11: a switch that hangs after installing its boot entry is stopped at
// DEPLOY_SWITCH_TIMEOUT: its transient unit is gone, the boot entry is reverted to the
// running generation, the switch is an error (exit 1). The run must end long before
// the hang (an hour) does.
func TestDeploySwitchTimeout(t *testing.T) {
	node, good := setup(t, "healthy")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
	hung := testbed.Require(t).Build(t, "hung-switch", "")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, deployArgs(node, "--toplevel", hung, "--output", "json")...)
	cmd.Env = append(append(os.Environ(), fastEnv...), "DEPLOY_SWITCH_TIMEOUT=5")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("switchyard still running after %s with DEPLOY_SWITCH_TIMEOUT=5: the switch is not bounded\nstderr:\n%s",
			time.Since(start).Round(time.Second), stderr.String())
	}
	r := run{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r.events = parseJSONLines(t, r.stdout)
	wantCode(t, r, 1)
	v := r.verdict(t)
	if sw := v["switch"].(map[string]any); sw["result"] != "error" {
		t.Errorf("switch %v, want error", sw)
	}
	if v["boot_entry"] != good {
		t.Errorf("boot_entry %v, want the running generation %s", v["boot_entry"], good)
	}
	if got := node.Readlink(t, "/run/current-system"); got != good {
		t.Errorf("the node runs %q, want %q", got, good)
	}
	if got := bootInit(t, node); got != good+"/init" {
		t.Errorf("/sbin/init -> %q, want the running generation's %q (reverted)", got, good+"/init")
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != good {
		t.Errorf("system profile -> %q, want %q", got, good)
	}
	if units := switchUnits(t, node); len(units) != 0 {
		t.Errorf("switch units left on the node: %v", units)
	}
	if out, _ := node.Exec(context.Background(), "pgrep", "-f", hung+"/bin/switch-to-configuration"); strings.TrimSpace(out) != "" {
		t.Errorf("the hung switch still runs: pids %s", out)
	}
	if !strings.Contains(strings.Join(logMsgs(r), "\n"), "DEPLOY_SWITCH_TIMEOUT") {
		t.Errorf("no log names the bound: %q", logMsgs(r))
	}

	// A bad bound is refused by name before anything happens.
	bad := switchyard(t, []string{"DEPLOY_SWITCH_TIMEOUT=0"}, "deploy", "--target", "root@127.0.0.1:1", "--toplevel", "/nix/store/x")
	wantCode(t, bad, 2)
	if !strings.Contains(bad.stderr, "DEPLOY_SWITCH_TIMEOUT") {
		t.Errorf("stderr %q", bad.stderr)
	}
}

// Issue 30 item 3 (SPEC 4.3): NixOS's switch-to-configuration repoints
// /run/current-system before it starts units, so the usual hang (a start job that
// never finishes: late-hang's oneshot) comes after the link moved. Stopped at
// DEPLOY_SWITCH_TIMEOUT, the switch is an error (exit 1) and the boot entry and system
// profile are back on the generation the node ran before, whatever
// /run/current-system says: the hung generation is never made the boot default. With
// confirmation on (the default) the node also switches itself back (SPEC 4.6); with
// DEPLOY_CONFIRM_TIMEOUT=0 it stays where the hung activation left it.
func TestDeploySwitchTimeoutAfterLinkMoved(t *testing.T) {
	for _, c := range []struct {
		name    string
		env     []string
		running func(good, hung string) string
	}{
		{"node switches back", nil, func(good, _ string) string { return good }},
		{"confirmation off", []string{"DEPLOY_CONFIRM_TIMEOUT=0"}, func(_, hung string) string { return hung }},
	} {
		t.Run(c.name, func(t *testing.T) {
			node, good := setup(t, "healthy")
			wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
			hung := testbed.Require(t).Build(t, "late-hang", "")
			start := time.Now()
			r := switchyard(t, append([]string{"DEPLOY_SWITCH_TIMEOUT=5"}, c.env...), deployArgs(node, "--toplevel", hung, "--output", "json")...)
			if d := time.Since(start); d > 3*time.Minute {
				t.Errorf("the run took %s with DEPLOY_SWITCH_TIMEOUT=5", d.Round(time.Second))
			}
			if got, want := node.Readlink(t, "/run/current-system"), c.running(good, hung); got != want {
				t.Errorf("/run/current-system -> %q, want %q", got, want)
			}
			wantCode(t, r, 1)
			v := r.verdict(t)
			if sw := v["switch"].(map[string]any); sw["result"] != "error" {
				t.Errorf("switch %v, want error", sw)
			}
			if v["boot_entry"] != good {
				t.Errorf("boot_entry %v, want the generation the node ran before, %s", v["boot_entry"], good)
			}
			if got := bootInit(t, node); got != good+"/init" {
				t.Errorf("/sbin/init -> %q, want the previous generation's %q", got, good+"/init")
			}
			if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != good {
				t.Errorf("system profile -> %q, want %q", got, good)
			}
			if !strings.Contains(strings.Join(logMsgs(r), "\n"), "DEPLOY_SWITCH_TIMEOUT") {
				t.Errorf("no log names the bound: %q", logMsgs(r))
			}
			if units := switchUnits(t, node); len(units) != 0 {
				// systemctl status exits 3 for a unit that is not active: its output is what counts.
				status, _ := node.Exec(context.Background(), "systemctl", "status", "--no-pager", "--lines=30", "--", units[0])
				t.Errorf("switch units left on the node: %v\n%s\nthe run's log:\n%s", units, status, strings.Join(logMsgs(r), "\n"))
			}
		})
	}
}

// Issue 11 item 12: switch-to-configuration exits 100 (the new init is incompatible
// with the running one): it installed the new boot entry and did not activate. The
// verdict reports reboot-needed, keeps the new boot entry (finalize sets the profile),
// judges the node as it runs, exits 0 and says the node must reboot.
func TestDeployRebootNeeded(t *testing.T) {
	node, good := setup(t, "healthy")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
	next := testbed.Require(t).Build(t, "needs-reboot", "")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", next, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	if sw := v["switch"].(map[string]any); sw["result"] != "reboot-needed" || sw["exit_code"] != 100.0 {
		t.Errorf("switch %v, want reboot-needed (exit 100)", sw)
	}
	if v["ok"] != true || v["toplevel"] != next || v["boot_entry"] != next || v["system_state"] != "running" {
		t.Errorf("verdict %v", v)
	}
	if got := node.Readlink(t, "/run/current-system"); got != good {
		t.Errorf("the node runs %q, want the old generation %q until it reboots", got, good)
	}
	if got := bootInit(t, node); got != next+"/init" {
		t.Errorf("/sbin/init -> %q, want the new generation's %q", got, next+"/init")
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != next {
		t.Errorf("system profile -> %q, want %q", got, next)
	}
	if !strings.Contains(strings.Join(logMsgs(r), "\n"), "must reboot") {
		t.Errorf("no log says the node must reboot: %q", logMsgs(r))
	}

	// The text report says so too.
	r = switchyard(t, nil, deployArgs(node, "--toplevel", next)...)
	wantCode(t, r, 0)
	if line := lineWith(r.stdout, "switch:"); !strings.Contains(line, "reboot-needed (exit 100)") || !strings.Contains(line, "must reboot") {
		t.Errorf("switch line %q:\n%s", line, r.stdout)
	}
}

// Issue 11 item 5: apply calls a node unchanged only when the running system, the
// system profile and the default boot entry all name the toplevel. A node whose
// profile, then whose boot entry, points elsewhere is not switched again (it runs the
// right system) but finalize runs and points them back.
func TestSSHApplyUnchangedNeedsProfileAndBootEntry(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "ssh", "healthy", map[string]*testbed.Node{"web1": node})
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	r := switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	top, _ := verdicts(t, r)["web1"]["toplevel"].(string)
	if top == "" {
		t.Fatalf("no toplevel: %v", verdicts(t, r))
	}
	other := bed.Build(t, "healthy", "elsewhere")
	node.CopyClosure(t, other)

	for _, c := range []struct {
		what  string
		argv  []string
		check func() string
	}{
		{"system profile", []string{"nix-env", "-p", "/nix/var/nix/profiles/system", "--set", other},
			func() string { return node.Readlink(t, "/nix/var/nix/profiles/system") }},
		{"boot entry", []string{"ln", "-sfn", other + "/init", "/sbin/init"},
			func() string { return strings.TrimSuffix(bootInit(t, node), "/init") }},
		// A node with systemd-boot: its default entry (loader.conf) is the boot entry,
		// as systemd-boot-builder.py writes it.
		{"systemd-boot default entry", []string{"sh", "-c", `mkdir -p /boot/loader/entries &&
			printf 'title NixOS\nversion Generation 99\noptions init=%s/init console=ttyS0\n' "$1" >/boot/loader/entries/nixos-generation-99.conf &&
			printf 'timeout 5\ndefault nixos-generation-99.conf\n' >/boot/loader/loader.conf`, "sh", other},
			func() string {
				conf := node.MustExec(t, "sh", "-c", `d=$(awk '$1 == "default" { print $2 }' /boot/loader/loader.conf) && cat "/boot/loader/entries/$d"`)
				for _, f := range strings.Fields(conf) {
					if init, ok := strings.CutPrefix(f, "init="); ok {
						return strings.TrimSuffix(init, "/init")
					}
				}
				return "no init= in the default entry: " + conf
			}},
	} {
		node.MustExec(t, c.argv...)
		r := switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
		wantCode(t, r, 0)
		v := verdicts(t, r)["web1"]
		if v["switch"].(map[string]any)["result"] != "unchanged" || v["ok"] != true || v["boot_entry"] != top {
			t.Errorf("%s moved: verdict %v", c.what, v)
		}
		ran := map[string]string{}
		for _, e := range r.events {
			if e["kind"] == "phase" && (e["phase"] == "switch" || e["phase"] == "finalize") {
				ran[e["phase"].(string)] = e["state"].(string)
			}
		}
		if ran["switch"] != "skipped" || ran["finalize"] != "done" {
			t.Errorf("%s moved: switch %s, finalize %s; want switch skipped, finalize done", c.what, ran["switch"], ran["finalize"])
		}
		if got := c.check(); got != top {
			t.Errorf("%s -> %q after the apply, want %q", c.what, got, top)
		}
	}
}

// Issue 11 item 6: a switch that started but never finished (its unit stopped by
// hand while it ran, so no exit status) is switch.result "error": never "skipped"
// (the verdict-only pass), nor "never-confirmed" (a switch that exited 0 and did not
// activate).
func TestDeploySwitchResultUnreadIsError(t *testing.T) {
	node, good := setup(t, "healthy")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
	hung := testbed.Require(t).Build(t, "hung-switch", "")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, deployArgs(node, "--toplevel", hung, "--output", "json")...)
	cmd.Env = append(os.Environ(), fastEnv...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	stopped := false
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		var e map[string]any
		if stopped || json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		if e["kind"] == "phase" && e["phase"] == "switch" && e["state"] == "done" {
			// Stopping the running unit ends it cleanly: systemd unloads it at once.
			for _, u := range switchUnits(t, node) {
				node.MustExec(t, "systemctl", "stop", u)
			}
			stopped = true
		}
	}
	werr := cmd.Wait()
	r := run{stdout: out.String(), stderr: stderr.String()}
	if ee, ok := werr.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if werr != nil {
		t.Fatalf("switchyard: %v\n%s", werr, r.stderr)
	}
	r.events = parseJSONLines(t, r.stdout)
	if !stopped {
		t.Fatalf("no switch done event:\n%s", r.stdout)
	}
	if r.code == 0 {
		t.Errorf("exit 0 after a switch whose result was never read")
	}
	v := r.verdict(t)
	if sw := v["switch"].(map[string]any); sw["result"] != "error" {
		t.Errorf("switch %v, want error", sw)
	}
	if v["reachable"] != true {
		t.Errorf("reachable %v", v["reachable"])
	}
}

// Issue 11 item 6: a node in rescue mode (systemctl is-system-running says
// "maintenance") answers: it is reachable, and the reason names what systemd said,
// never "unreachable". The incus transport reaches it without sshd, which rescue
// mode stops.
func TestDeployMaintenanceIsReachable(t *testing.T) {
	node, top := setup(t, "healthy")
	node.MustExec(t, "systemctl", "isolate", "rescue.target")
	r := switchyard(t, []string{"DEPLOY_WAIT_TIMEOUT=3"},
		"deploy", "--transport", "incus", "--target", node.Name, "--toplevel", top, "--output", "json")
	wantCode(t, r, 3)
	v := r.verdict(t)
	reasons := strings.Join(strs(v["reasons"]), "; ")
	if v["reachable"] != true || !strings.Contains(reasons, `systemd is "maintenance" (rescue or emergency mode)`) ||
		strings.Contains(reasons, "unreachable") {
		t.Errorf("reachable %v, reasons %q", v["reachable"], reasons)
	}
}

// Issue 11 item 6: the connection drops right after the switch's result was read
// (sshd down for 5 s): confirm's readlink of /run/current-system is retried through
// the reconnect, as the switch-result phase is, instead of failing the node (exit 3).
func TestDeployConfirmAfterBounce(t *testing.T) {
	node, top := setup(t, "bounces-after-switch")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	if sw := v["switch"].(map[string]any); sw["result"] != "ok" || v["ok"] != true || v["boot_entry"] != top {
		t.Errorf("verdict %v", v)
	}
	if got := node.Readlink(t, "/run/current-system"); got != top {
		t.Errorf("the node runs %q, want %q", got, top)
	}
}

// Issue 11 item 9: finalize fails after the report (the system profile cannot be
// set): conclude settles the node's exit code at 3 and a log event names why the
// exit code is not the reported verdict's.
func TestDeployFinalizeFailsAfterReport(t *testing.T) {
	node, top := setup(t, "healthy")
	// A directory where the profile's link belongs: nix-env cannot set it.
	node.MustExec(t, "sh", "-c", "rm -f /nix/var/nix/profiles/system && mkdir -p /nix/var/nix/profiles/system/blocked")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 3)
	v := r.verdict(t)
	if v["exit_code"] != 0.0 || v["ok"] != true {
		t.Errorf("the reported verdict %v, want ok (finalize runs after the report)", v)
	}
	if n := countLogs(r, "web1", "conclude: exit 3, not the reported verdict's 0: finalize: "); n != 1 {
		t.Errorf("conclude named the raised exit code %d times, want once: %q", n, logMsgs(r))
	}
	if sum := r.events[len(r.events)-1]; sum["exit_code"] != 3.0 {
		t.Errorf("summary %v", sum)
	}
}

// Issue 30 items 1 and 5 (SPEC 4.6): a generation whose activation stops sshd from
// taking new connections, while the deployer's open connection survives. The
// confirmation needs a fresh connection, which the node refuses, so the node switches
// itself back within DEPLOY_CONFIRM_TIMEOUT: the deployer, once it reaches the node
// again, reports rolled-back, exit 1; the node runs the generation it ran before with
// profile and boot entry on it, and takes new connections (a deploy after it works).
// Before the confirmation this deploy reported switch ok, exit 0, and nobody could
// connect to the node afterwards.
func TestDeployConfirmCutOffRollsBack(t *testing.T) {
	node, good := setup(t, "healthy")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
	cut := testbed.Require(t).Build(t, "cuts-ssh", "")
	r := switchyard(t, []string{"DEPLOY_CONFIRM_TIMEOUT=5", "DEPLOY_SWITCH_TIMEOUT=30"}, deployArgs(node, "--toplevel", cut, "--output", "json")...)
	wantCode(t, r, 1)
	v := r.verdict(t)
	if sw := v["switch"].(map[string]any); sw["result"] != "rolled-back" {
		t.Errorf("switch %v, want rolled-back", sw)
	}
	if v["boot_entry"] != good || v["reachable"] != true {
		t.Errorf("verdict %v, want boot_entry %s, reachable", v, good)
	}
	if got := node.Readlink(t, "/run/current-system"); got != good {
		t.Errorf("/run/current-system -> %q, want the previous generation %q", got, good)
	}
	if got := bootInit(t, node); got != good+"/init" {
		t.Errorf("/sbin/init -> %q, want %q", got, good+"/init")
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != good {
		t.Errorf("system profile -> %q, want %q", got, good)
	}
	if msgs := strings.Join(logMsgs(r), "\n"); !strings.Contains(msgs, "DEPLOY_CONFIRM_TIMEOUT") {
		t.Errorf("no log names the confirmation's timeout: %q", logMsgs(r))
	}
	if units := switchUnits(t, node); len(units) != 0 {
		t.Errorf("switch units left on the node: %v", units)
	}
	// New connections work again.
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
}

// A healthy deploy is confirmed over the fresh connection and stays: long after
// DEPLOY_CONFIRM_TIMEOUT the node still runs it and its record says confirmed.
func TestDeployConfirmedStays(t *testing.T) {
	node, first := setup(t, "healthy")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", first, "--output", "json")...), 0)
	next := testbed.Require(t).Build(t, "healthy", "elsewhere")
	r := switchyard(t, []string{"DEPLOY_CONFIRM_TIMEOUT=2"}, deployArgs(node, "--toplevel", next, "--output", "json")...)
	wantCode(t, r, 0)
	time.Sleep(6 * time.Second)
	if got := node.Readlink(t, "/run/current-system"); got != next {
		t.Errorf("/run/current-system -> %q after the timeout, want the confirmed %q", got, next)
	}
	out := node.MustExec(t, "sh", "-c", "cat /run/switchyard/switch/*/state")
	if !strings.Contains(out, "confirmed") || strings.Contains(out, "roll") {
		t.Errorf("the node's records say %q, want one confirmed and no rollback", out)
	}
}

// slowReadlink makes the node's readlink take 2 s for /run/current-system inside a
// unit (systemd sets INVOCATION_ID; an ssh or incus session has none): the
// confirmation script of the switch's unit then writes its "waiting" state 2 s after
// switch-to-configuration's status, as a loaded node does a moment later.
const slowReadlink = `mv /usr/bin/readlink /usr/bin/readlink.real
cat >/usr/bin/readlink <<'EOF'
#!/bin/sh
if [ -n "$INVOCATION_ID" ] && [ "$2" = /run/current-system ]; then sleep 2; fi
exec /usr/bin/readlink.real "$@"
EOF
chmod 755 /usr/bin/readlink
`

// The switch's status is on the node's record while its state still says
// "activating": the deployer reads the record until the node's script has written
// what comes next, then confirms over a fresh connection. Before, it went on from
// "activating": it stopped the unit that waited for the confirmation and reported
// the node confirmed with no confirmation (seen in the bench's 16-node fleet as a
// record left "waiting").
func TestDeployConfirmsANodeSlowToWait(t *testing.T) {
	node, first := setup(t, "healthy")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", first, "--output", "json")...), 0)
	node.MustExec(t, "sh", "-c", slowReadlink)
	next := testbed.Require(t).Build(t, "healthy", "slow-to-wait")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", next, "--output", "json")...)
	wantCode(t, r, 0)
	if n := countLogs(r, "web1", "confirm: confirmed "+next+" over a fresh connection"); n != 1 {
		t.Errorf("the confirmation over a fresh connection logged %d times, want once: %q", n, logMsgs(r))
	}
	out := node.MustExec(t, "sh", "-c", "cat /run/switchyard/switch/*/state")
	if !strings.Contains(out, "confirmed") || strings.Contains(out, "waiting") || strings.Contains(out, "activating") {
		t.Errorf("the node's records say %q, want the deploy's confirmed", out)
	}
	if got := node.Readlink(t, "/run/current-system"); got != next {
		t.Errorf("/run/current-system -> %q, want %q", got, next)
	}
}
