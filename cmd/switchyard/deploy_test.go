package main_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// setup launches a node and builds attr; both tests and nodes run in parallel.
func setup(t *testing.T, attr string) (*testbed.Node, string) {
	t.Helper()
	bed := testbed.Require(t)
	t.Parallel()
	top := bed.Build(t, attr, "")
	return bed.Node(t), top
}

func TestDeployHealthy(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	// --expr evaluates and builds on this machine, then deploys.
	r := switchyard(t, nil, deployArgs(node, "--expr", filepath.Join(bed.Root, "testbed", "closures"), "--attr", "healthy", "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	top, _ := v["toplevel"].(string)
	if v["ok"] != true || v["exit_code"] != 0.0 || v["reachable"] != true || v["pass"] != "deploy" {
		t.Errorf("verdict: %v", v)
	}
	if sw := v["switch"].(map[string]any); sw["result"] != "ok" || sw["exit_code"] != 0.0 {
		t.Errorf("switch: %v", sw)
	}
	if v["system_state"] != "running" {
		t.Errorf("system_state %v", v["system_state"])
	}
	if v["boot_entry"] != top {
		t.Errorf("boot_entry %v, want %s", v["boot_entry"], top)
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != top {
		t.Errorf("system profile -> %q, want %q", got, top)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got != top {
		t.Errorf("boot entry -> %q, want %q", got, top)
	}
	if got := strs(units(t, v, "failed")); len(got) != 0 {
		t.Errorf("failed units on a healthy node: %v", got)
	}
	want := []string{"build", "wait", "push", "snapshot", "switch", "switch-result", "confirm", "owned", "sweep",
		"settle", "cycle-watch", "loop-watch", "classify", "verdict", "report", "finalize", "conclude"}
	if got := phaseOrder(r); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("phases ran %v, want %v", got, want)
	}
	sum := r.events[len(r.events)-1]
	if sum["nodes"] != 1.0 || sum["ok"] != 1.0 || sum["failed"] != 0.0 || sum["exit_code"] != 0.0 {
		t.Errorf("summary %v", sum)
	}

	// Text output: the verdict block on stdout, progress on stderr.
	r = switchyard(t, nil, deployArgs(node, "--toplevel", top)...)
	wantCode(t, r, 0)
	for _, line := range []string{"Deploy verdict for web1 (ssh root@127.0.0.1:", "  pass:            deploy",
		"  switch:          ok (exit 0)", "  system state:    running", "  failed:          <none>", "  result:          ok"} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("text verdict lacks %q:\n%s", line, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "web1: switch done") {
		t.Errorf("no progress on stderr:\n%s", r.stderr)
	}
}

// SPEC 9.1: a failed owned unit fails the deploy (exit 1) yet the node keeps the new
// boot entry; with DEPLOY_STRICT_UNITS=0 it is named and the deploy passes.
func TestDeployFailedUnit(t *testing.T) {
	node, top := setup(t, "failed-unit")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 1)
	v := r.verdict(t)
	if got := strs(units(t, v, "failed")); strings.Join(got, ",") != "broken.service" {
		t.Errorf("failed = %v, want [broken.service]", got)
	}
	if sw := v["switch"].(map[string]any); sw["result"] != "units-failed" || sw["exit_code"] != 4.0 {
		t.Errorf("switch: %v", sw)
	}
	if v["ok"] != false || !strings.Contains(strings.Join(strs(v["reasons"]), ";"), "broken.service") {
		t.Errorf("verdict: ok=%v reasons=%v", v["ok"], v["reasons"])
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != top {
		t.Errorf("system profile -> %q, want the new toplevel %q", got, top)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got != top {
		t.Errorf("boot entry -> %q, want the new toplevel %q", got, top)
	}
	// The failed switch's transient unit is unloaded too (a failed unit stays loaded
	// until reset).
	if got := switchUnits(t, node); len(got) != 0 {
		t.Errorf("switch unit left loaded: %v", got)
	}

	// The same deploy from the derivation (--drv realises it first).
	drv, err := exec.Command("nix-store", "--query", "--deriver", top).Output()
	if err != nil {
		t.Fatalf("nix-store --query --deriver: %v", err)
	}
	r = switchyard(t, []string{"DEPLOY_STRICT_UNITS=0"}, deployArgs(node, "--drv", strings.TrimSpace(string(drv)), "--output", "json")...)
	wantCode(t, r, 0)
	v = r.verdict(t)
	if got := strs(units(t, v, "failed")); strings.Join(got, ",") != "broken.service" {
		t.Errorf("strict off: failed = %v, want [broken.service]", got)
	}
	if v["toplevel"] != top {
		t.Errorf("--drv deployed %v, want %s", v["toplevel"], top)
	}
	if v["ok"] != true || v["strict_units"] != false {
		t.Errorf("strict off: ok=%v strict_units=%v", v["ok"], v["strict_units"])
	}
}

// SPEC 9.2: systemd could not spawn the process for host reasons: a spawn fault, not blamed.
func TestDeploySpawnFault(t *testing.T) {
	node, top := setup(t, "spawn-fault")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	faults := map[string]string{}
	for _, f := range units(t, v, "spawn_faults").([]any) {
		m := f.(map[string]any)
		faults[m["unit"].(string)] = m["status"].(string)
	}
	if !strings.HasPrefix(faults["numa-pinned.service"], "242/") || !strings.HasPrefix(faults["realtime.service"], "214/") {
		t.Errorf("spawn faults %v, want numa-pinned.service 242/..., realtime.service 214/...", faults)
	}
	if got := strs(units(t, v, "failed")); len(got) != 0 {
		t.Errorf("spawn faults blamed as failed units: %v", got)
	}
}

// SPEC 9.3: a restart loop is reported and does not fail the deploy; in the
// verdict-only pass, once past its budget (DEPLOY_LOOP_BUDGET=30), it fails naming it.
func TestDeployRestartLoop(t *testing.T) {
	node, top := setup(t, "restart-loop")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	loops, _ := units(t, v, "restart_loops").([]any)
	if len(loops) != 1 {
		t.Fatalf("restart loops %v, want flappy.service", loops)
	}
	loop := loops[0].(map[string]any)
	if loop["unit"] != "flappy.service" || loop["budget_s"] != 30.0 || loop["over_budget"] != false {
		t.Errorf("loop %v", loop)
	}
	time.Sleep(32 * time.Second) // past the unit's own budget
	r = switchyard(t, []string{"DEPLOY_VERDICT_ONLY=1"}, deployArgs(node, "--output", "json")...)
	wantCode(t, r, 1)
	v = r.verdict(t)
	if v["pass"] != "verdict-only" || v["switch"].(map[string]any)["result"] != "skipped" {
		t.Errorf("verdict-only verdict: %v", v)
	}
	reasons := strings.Join(strs(v["reasons"]), ";")
	if !strings.Contains(reasons, "flappy.service") || !strings.Contains(reasons, "budget 30s") {
		t.Errorf("reasons %q do not name the unit and its budget", reasons)
	}
}

// SPEC 9.4: the verdict-only pass waits for a converging chain and sweeps only after it.
func TestVerdictOnlyChainConverges(t *testing.T) {
	node, top := setup(t, "secret-chain")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...), 0)
	// Take the chain down: the secret gone first (secrets-ready.path starts its
	// service again while the file exists), then the agent and the tail stopped. The
	// agent starts again once the gate has begun (its phase's start event) and
	// delivers the secret 4 s later, so the gate has to wait for it however long the
	// pass took to reach the gate (a restart before the pass could deliver first on a
	// busy machine).
	node.MustExec(t, "rm", "-f", "/run/switchyard-test/secret")
	node.MustExec(t, "systemctl", "stop", "secret-agent.service", "secrets-ready.service")
	agentStarted := false
	r := switchyardWatching(t, []string{"DEPLOY_VERDICT_ONLY=1"}, func(e map[string]any) {
		if e["kind"] == "phase" && e["phase"] == "chain" && e["state"] == "start" {
			node.MustExec(t, "systemctl", "start", "secret-agent.service")
			agentStarted = true
		}
	}, deployArgs(node, "--output", "json")...)
	wantCode(t, r, 0)
	if !agentStarted {
		t.Fatal("no start event of the chain phase")
	}
	var chainDone, sweepStart = -1, -1
	var chainMS float64
	for i, e := range r.events {
		if e["kind"] == "phase" && e["phase"] == "chain" && e["state"] == "done" {
			chainDone, chainMS = i, e["elapsed_ms"].(float64)
		}
		if e["kind"] == "phase" && e["phase"] == "sweep" && e["state"] == "start" {
			sweepStart = i
		}
	}
	if chainDone < 0 || sweepStart < chainDone {
		t.Fatalf("chain done at event %d, sweep started at %d: the sweep must follow the chain", chainDone, sweepStart)
	}
	if chainMS < 2000 {
		t.Errorf("the chain gate passed after %v ms; it should have waited for the secret", chainMS)
	}
	if st := node.UnitProperties(t, "secrets-ready.service", "ActiveState")["ActiveState"]; st != "active" {
		t.Errorf("chain tail %s after the gate", st)
	}
}

// SPEC 9.4: a failed chain head, or a chain without change for DEPLOY_CHAIN_STALL,
// stops the gate early, naming the member.
func TestVerdictOnlyChainStopsEarly(t *testing.T) {
	t.Run("failed head", func(t *testing.T) {
		node, top := setup(t, "secret-chain-broken")
		switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
		start := time.Now()
		r := switchyard(t, []string{"DEPLOY_VERDICT_ONLY=1", "DEPLOY_CHAIN_TIMEOUT=120"}, deployArgs(node, "--output", "json")...)
		wantCode(t, r, 1)
		if time.Since(start) > 60*time.Second {
			t.Errorf("gate did not stop early: %s", time.Since(start))
		}
		if reasons := strings.Join(strs(r.verdict(t)["reasons"]), ";"); !strings.Contains(reasons, "chain member secret-agent.service failed") {
			t.Errorf("reasons %q", reasons)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		node, top := setup(t, "secret-chain-stalled")
		wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...), 0)
		r := switchyard(t, []string{"DEPLOY_VERDICT_ONLY=1", "DEPLOY_CHAIN_STALL=3", "DEPLOY_CHAIN_TIMEOUT=120"}, deployArgs(node, "--output", "json")...)
		wantCode(t, r, 1)
		if reasons := strings.Join(strs(r.verdict(t)["reasons"]), ";"); !strings.Contains(reasons, "chain stalled at secrets-ready.service") {
			t.Errorf("reasons %q", reasons)
		}
		for _, e := range r.events {
			if e["kind"] == "phase" && e["phase"] == "sweep" && e["state"] != "skipped" {
				t.Errorf("sweep ran although the chain is down: %v", e)
			}
		}
	})
}

// SPEC 9.5: a failed unit the configuration does not define is set aside.
func TestDeploySetAside(t *testing.T) {
	node, top := setup(t, "healthy")
	unit := "[Unit]\nDescription=left over from an older setup\n[Service]\nType=oneshot\nExecStart=/bin/false\n"
	node.MustExec(t, "sh", "-c", "printf '"+unit+"' > /etc/systemd/system/old-cron.service && systemctl daemon-reload && (systemctl start old-cron.service || true)")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	if got := strs(units(t, v, "set_aside")); strings.Join(got, ",") != "old-cron.service" {
		t.Errorf("set aside %v, want [old-cron.service]", got)
	}
	if got := strs(units(t, v, "failed")); len(got) != 0 {
		t.Errorf("failed %v", got)
	}
}

// SPEC 9.6: a Condition*=-skipped unit is not restarted and is named.
func TestDeployConditionSkipped(t *testing.T) {
	node, top := setup(t, "condition-skipped")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 0)
	v := r.verdict(t)
	if got := strs(units(t, v, "condition_skipped")); strings.Join(got, ",") != "only-on-metal.service" {
		t.Errorf("condition skipped %v", got)
	}
	for _, e := range r.events {
		if e["kind"] == "log" && strings.Contains(fmt.Sprint(e["msg"]), "restarting") && strings.Contains(fmt.Sprint(e["msg"]), "only-on-metal") {
			t.Errorf("the sweep restarted a condition-skipped unit: %v", e)
		}
	}
	if st := node.UnitProperties(t, "only-on-metal.service", "ActiveState")["ActiveState"]; st != "inactive" {
		t.Errorf("only-on-metal.service is %s", st)
	}
}

// SPEC 9.7: a switch that never activates: boot entry reverted to the running generation, exit 1.
func TestDeployNeverConfirmed(t *testing.T) {
	node, good := setup(t, "healthy")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", good, "--output", "json")...), 0)
	bad := testbed.Require(t).Build(t, "never-activates", "")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", bad, "--output", "json")...)
	wantCode(t, r, 1)
	v := r.verdict(t)
	if v["switch"].(map[string]any)["result"] != "never-confirmed" {
		t.Errorf("switch %v", v["switch"])
	}
	if v["boot_entry"] != good {
		t.Errorf("boot_entry %v, want the running generation %s", v["boot_entry"], good)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got != good {
		t.Errorf("boot entry -> %q, want the running generation %q", got, good)
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != good {
		t.Errorf("system profile -> %q, want %q", got, good)
	}
	for _, e := range r.events {
		if e["kind"] == "phase" && e["phase"] == "finalize" && e["state"] != "skipped" {
			t.Errorf("finalize ran after a never-confirmed switch: %v", e)
		}
	}
}

// SPEC 9.8: an unreachable node is reported unreachable within DEPLOY_WAIT_TIMEOUT, exit 3.
func TestDeployUnreachable(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	top := bed.Build(t, "healthy", "")
	kh := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(kh, nil, 0o644)
	port := closedPort(t)
	start := time.Now()
	r := switchyard(t, []string{"DEPLOY_WAIT_TIMEOUT=3"}, "deploy", "--node", "gone", "--target", fmt.Sprintf("root@127.0.0.1:%d", port),
		"--known-hosts", kh, "--ssh-key", bed.KeyFile, "--toplevel", top, "--output", "json")
	wantCode(t, r, 3)
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("took %s with DEPLOY_WAIT_TIMEOUT=3", took)
	}
	v := r.verdict(t)
	if v["reachable"] != false || v["ok"] != false || v["exit_code"] != 3.0 {
		t.Errorf("verdict %v", v)
	}
	if units(t, v, "failed") != nil {
		t.Errorf("units of an unreachable node must be null (not read)")
	}
	if !strings.Contains(strings.Join(strs(v["reasons"]), ";"), "unreachable") {
		t.Errorf("reasons %v", v["reasons"])
	}
}

// SPEC 9.9: when the system bus is severed, the lists read <not read>, never <none>.
func TestDeploySeveredBus(t *testing.T) {
	node, top := setup(t, "healthy")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, deployArgs(node, "--toplevel", top)...)
	cmd.Env = append(append(os.Environ(), fastEnv...), "DEPLOY_CYCLE_WINDOWS=6", "DEPLOY_CYCLE_INTERVAL=1")
	stderr, _ := cmd.StderrPipe()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	severed := false
	sc := bufio.NewScanner(stderr)
	var progress strings.Builder
	for sc.Scan() {
		progress.WriteString(sc.Text() + "\n")
		if !severed && strings.Contains(sc.Text(), "web1: settle done") {
			// Root's systemctl talks to systemd's private socket; take it away
			// together with the bus daemon.
			node.MustExec(t, "sh", "-c", "systemctl stop dbus.socket dbus.service; mv /run/systemd/private /run/systemd/private.off")
			t.Cleanup(func() { node.Exec(context.Background(), "mv", "/run/systemd/private.off", "/run/systemd/private") })
			severed = true
		}
	}
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if !severed {
		t.Fatalf("never saw the settle phase end:\n%s", progress.String())
	}
	if code != 3 {
		t.Errorf("exit %d, want 3 (systemd state not read)\n%s\n%s", code, stdout.String(), progress.String())
	}
	out := stdout.String()
	for _, key := range []string{"system state:", "failed:", "restart loops:", "cycling:", "stale jobs:", "spawn faults:", "set aside:", "skipped:"} {
		line := lineWith(out, key)
		if !strings.Contains(line, "<not read>") {
			t.Errorf("%q line reads %q, want <not read>", key, line)
		}
	}
	if strings.Contains(out, "<none>") {
		t.Errorf("<none> printed for state that was not read:\n%s", out)
	}
}

func lineWith(text, key string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, key) {
			return l
		}
	}
	return ""
}

// SPEC 9.10: .link files naming a PermanentMACAddress the node lacks: refused before the copy.
func TestDeployPermanentMACGate(t *testing.T) {
	node, top := setup(t, "foreign-mac")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 2)
	if reasons := strings.Join(strs(r.verdict(t)["reasons"]), ";"); !strings.Contains(reasons, "10-uplink.link") {
		t.Errorf("reasons %q do not name the .link file", reasons)
	}
	if out := node.MustExec(t, "nix-store", "--check-validity", "--print-invalid", top); strings.TrimSpace(out) != top {
		t.Errorf("the closure reached the node although the gate refused it")
	}
	if got := node.Readlink(t, "/run/current-system"); got != "" {
		t.Errorf("/run/current-system -> %q: the node changed", got)
	}
}

// A host key that does not match: exit 2, nothing on the node changes.
func TestDeployHostKeyMismatch(t *testing.T) {
	node, top := setup(t, "healthy")
	other := filepath.Join(t.TempDir(), "other")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	pub, _ := os.ReadFile(other + ".pub")
	f := strings.Fields(string(pub))
	kh := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(kh, []byte(fmt.Sprintf("[127.0.0.1]:%d %s %s\n", node.SSHPort, f[0], f[1])), 0o644)
	r := switchyard(t, nil, "deploy", "--node", "web1", "--target", fmt.Sprintf("root@127.0.0.1:%d", node.SSHPort),
		"--known-hosts", kh, "--ssh-key", node.KeyFile, "--toplevel", top, "--output", "json")
	wantCode(t, r, 2)
	if out := node.MustExec(t, "nix-store", "--check-validity", "--print-invalid", top); strings.TrimSpace(out) != top {
		t.Errorf("the closure reached the node despite the host key mismatch")
	}
	if got := node.Readlink(t, "/run/current-system"); got != "" {
		t.Errorf("/run/current-system -> %q: the node changed", got)
	}
	if strings.Contains(r.stdout+r.stderr, node.KeyFile) {
		t.Errorf("output names the key file")
	}
}

// Bad input: one line naming the variable, exit 2, before any connection.
func TestDeployBadVariable(t *testing.T) {
	r := switchyard(t, []string{"DEPLOY_SETTLE_ATTEMPTS=lots"}, "deploy", "--target", "root@127.0.0.1:1", "--toplevel", "/nix/store/x")
	wantCode(t, r, 2)
	if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, "DEPLOY_SETTLE_ATTEMPTS") {
		t.Errorf("stderr %q", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout %q", r.stdout)
	}
}

func closedPort(t *testing.T) int {
	t.Helper()
	l, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// The shell transport: an existing prologue of hooks (ssh(1) and nix-copy-closure)
// drives the same body from the command line.
func TestDeployShellTransport(t *testing.T) {
	node, top := setup(t, "healthy")
	hooks := filepath.Join(testbed.RepoRoot(), "transports", "shell", "testdata", "ssh-hooks.sh")
	env := []string{fmt.Sprintf("SY_PORT=%d", node.SSHPort), "SY_KEY=" + node.KeyFile, "SY_KNOWN_HOSTS=" + node.KnownHosts}
	r := switchyard(t, env, "deploy", "--transport", "shell", "--hooks", hooks, "--node", "web1", "--toplevel", top, "--output", "json")
	wantCode(t, r, 0)
	v := r.verdict(t)
	if v["target"] != fmt.Sprintf("shell root@127.0.0.1:%d", node.SSHPort) || v["ok"] != true {
		t.Errorf("verdict %v", v)
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != top {
		t.Errorf("system profile -> %q, want %q", got, top)
	}
}
