package main_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 15 item 5: the fault-injection suite. The deployer is SIGKILLed during each
// of the 18 phases, the connection to the node is cut during each phase that talks
// to the node, the node reboots during the cycle watch; after each fault a rerun
// of the same apply must converge: exit 0, verdict ok and true, the node running one toplevel,
// with profile and boot entry agreeing, no deploy lock left, no switch unit loaded,
// and the state dir's record (the newest receipt) naming what the node runs.

// faultPool bounds the suite to three nodes at once (CI has two cores).
var faultPool = make(chan struct{}, 3)

func faultSlot(t *testing.T) {
	faultPool <- struct{}{}
	t.Cleanup(func() { <-faultPool })
}

// startFault starts switchyard (args must ask for JSON) in its own process group,
// so that a kill reaches everything the deployer started, as when a CI job or a
// laptop dies.
func startFault(t *testing.T, env []string, args ...string) *bgRun {
	t.Helper()
	return startBackground(t, true, env, args...)
}

// killGroup SIGKILLs the run's process group and waits for its end.
func (b *bgRun) killGroup(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	select {
	case <-b.done:
	case <-time.After(time.Minute):
		t.Fatal("the killed deployer did not end")
	}
}

// started lists the phases the run started, in order.
func (b *bgRun) started() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.events {
		if e != nil && e["kind"] == "phase" && e["state"] == "start" {
			out = append(out, fmt.Sprint(e["phase"]))
		}
	}
	return out
}

func phaseIs(phase, state string) func(map[string]any) bool {
	return func(e map[string]any) bool {
		return e["kind"] == "phase" && e["phase"] == phase && e["state"] == state
	}
}

// faultTree is an ssh-method tree for node web1 (reached at port, e.g. through a
// cut proxy) of generation gen, and the environment of its runs.
func faultTree(t *testing.T, method string, node *testbed.Node, port int, gen, cache string) (string, []string) {
	t.Helper()
	return faultTreeOf(t, method, "", node, port, gen, cache)
}

// faultTreeOf is faultTree with another test closure ("": healthy).
func faultTreeOf(t *testing.T, method, closure string, node *testbed.Node, port int, gen, cache string) (string, []string) {
	t.Helper()
	if closure == "" {
		closure = "healthy"
	}
	via := *node
	via.SSHPort = port
	tree, deployment := lockTreeOf(t, method, closure, &via, gen)
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + cache}
	if strings.HasPrefix(method, "tf") {
		env = append(env, "BOOTSTRAP=1", "BOOTSTRAP_SEED=x")
	}
	return tree, env
}

// converged checks that the rerun r left node as a finished deploy does, and
// returns the toplevel it runs.
func converged(t *testing.T, method string, node *testbed.Node, env []string, tree string, r run) string {
	t.Helper()
	wantCode(t, r, 0)
	v := verdicts(t, r)["web1"]
	top, _ := v["toplevel"].(string)
	if v == nil || v["ok"] != true || top == "" {
		t.Errorf("rerun verdict: %v", v)
	}
	if st := nodeState(t, node); st != [3]string{top, top, top} {
		t.Errorf("node runs / profile / boot entry %v, want the verdict's toplevel %s everywhere", st, top)
	}
	noStaleLock(t, node)
	if out := node.MustExec(t, "sh", "-c", "systemctl list-units --all --no-legend 'switchyard-switch-*' || true"); strings.TrimSpace(out) != "" {
		t.Errorf("a switch unit is left loaded on the node: %q", out)
	}
	switch method {
	case "ssh":
		// The ssh method's record of a node is its receipts: the newest names what
		// the node runs.
		shown := showReceipts(t, env, "ssh", tree)
		sort.Slice(shown, func(i, j int) bool { return shown[i].File < shown[j].File })
		if len(shown) == 0 || shown[len(shown)-1].Subject != top || shown[len(shown)-1].Error != "" {
			t.Errorf("the state dir's newest receipt does not name the running %s: %+v", top, shown)
		}
	default:
		st := tofuState(t, env, tree)["web1"]
		if st == nil || st["toplevel"] != top || st["ok"] != true {
			t.Errorf("the OpenTofu state of web1 %v does not match the node (runs %s)", st, top)
		}
	}
	return top
}

// TestFaultsKillSSHApply: for each of the 19 phases, `ssh apply` is SIGKILLed at
// the phase's start event, and a rerun converges (reboot: an `ssh apply --reboot`). `chain` runs in the verdict-only
// pass alone: there the deployed node's `ssh verdict` is killed at it, and both a
// rerun of the verdict and an apply converge. A phase that ends within the event's
// round trip (classify, verdict, report) is killed at its start event, that is
// during it; the log says which phases had started when the kill landed.
func TestFaultsKillSSHApply(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	cache := t.TempDir()
	for _, phase := range effects.PhaseNames() {
		t.Run(phase, func(t *testing.T) {
			t.Parallel()
			faultSlot(t)
			node := bed.Node(t)
			tree, env := faultTree(t, "ssh", node, node.SSHPort, "A", cache)
			apply := []string{"ssh", "apply", "--tree", tree, "--output", "json"}
			args := apply
			if phase == "chain" {
				wantCode(t, switchyard(t, env, apply...), 0)
				args = []string{"ssh", "verdict", "--tree", tree, "--output", "json"}
			}
			if phase == "reboot" {
				args = append(append([]string(nil), apply...), "--reboot")
			}
			b := startFault(t, env, args...)
			b.await(t, 5*time.Minute, phase+" start", phaseIs(phase, "start"))
			b.killGroup(t)
			t.Logf("killed at %s start; phases started: %v", phase, b.started())
			if phase == "chain" {
				r := switchyard(t, env, args...)
				wantCode(t, r, 0)
				if v := verdicts(t, r)["web1"]; v == nil || v["ok"] != true {
					t.Errorf("verdict after the kill: %v", v)
				}
			}
			converged(t, "ssh", node, env, tree, switchyard(t, env, apply...))
		})
	}
}

// TestFaultsKillSSHApplyMidSwitch: besides the kill at the switch's start event
// (which may land before the switch unit exists), `ssh apply` is SIGKILLed once
// its switch unit is loaded on the node, so the switch runs or has run with its
// result unread; a rerun converges.
func TestFaultsKillSSHApplyMidSwitch(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	faultSlot(t)
	node := bed.Node(t)
	tree, env := faultTree(t, "ssh", node, node.SSHPort, "A", t.TempDir())
	apply := []string{"ssh", "apply", "--tree", tree, "--output", "json"}
	b := startFault(t, env, apply...)
	awaitNode(t, b, node, "switch unit loaded", func(lock, unit bool, cur, prof string) bool { return unit })
	b.killGroup(t)
	t.Logf("killed with the switch unit loaded; phases started: %v; node then: %v", b.started(), nodeState(t, node))
	converged(t, "ssh", node, env, tree, switchyard(t, env, apply...))
}

// nodePhases are the phases of the deploy pass that talk to the node.
var nodePhases = []string{"wait", "push", "snapshot", "switch", "switch-result", "confirm", "owned",
	"sweep", "settle", "cycle-watch", "loop-watch", "finalize", "conclude"}

// TestFaultsCutSSHApply: for each phase that talks to the node, every live SSH
// connection of `ssh apply` is cut (reset) once the phase started (at its start
// event, or as soon as a connection is open if none is yet). The run recovers
// (exit 0) or exits 3 naming the node and a phase; a rerun converges.
func TestFaultsCutSSHApply(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	cache := t.TempDir()
	for _, phase := range nodePhases {
		t.Run(phase, func(t *testing.T) {
			t.Parallel()
			faultSlot(t)
			node := bed.Node(t)
			proxy := testbed.Cut(t, node)
			tree, env := faultTree(t, "ssh", node, proxy.Port, "A", cache)
			apply := []string{"ssh", "apply", "--tree", tree, "--output", "json"}
			b := startFault(t, env, apply...)
			b.await(t, 5*time.Minute, phase+" start", phaseIs(phase, "start"))
			cut := 0
			for deadline := time.Now().Add(time.Minute); cut == 0 && time.Now().Before(deadline); {
				if cut = proxy.Cut(); cut > 0 {
					break
				}
				select {
				case <-b.done:
					deadline = time.Now()
				case <-time.After(10 * time.Millisecond):
				}
			}
			if cut == 0 {
				t.Fatalf("no connection was open to cut during %s", phase)
			}
			r := b.wait(t, 10*time.Minute)
			t.Logf("cut %d connection(s) at %s start: exit %d; phases started %v", cut, phase, r.code, phaseOrder(r))
			switch r.code {
			case 0:
			case 3:
				named := false
				for _, m := range logMsgs(r) {
					for _, p := range effects.PhaseNames() {
						named = named || strings.HasPrefix(m, "web1: "+p+": ")
					}
				}
				if !named {
					t.Errorf("exit 3 without an error naming the node and the phase: %q", logMsgs(r))
				}
			default:
				t.Errorf("the cut run exited %d, want 0 (recovered) or 3: %q", r.code, logMsgs(r))
			}
			if v := verdicts(t, r)["web1"]; r.code == 0 && v != nil {
				if got := node.Readlink(t, "/run/current-system"); v["ok"] != true || got != v["toplevel"] {
					t.Errorf("the cut run says ok with %v but the node runs %s", v["toplevel"], got)
				}
			}
			converged(t, "ssh", node, env, tree, switchyard(t, env, apply...))
		})
	}
}

// TestFaultsRebootDuringCycleWatch: a node on generation A is deployed B and
// reboots (a forced container restart) during B's cycle watch: it comes back on its
// boot entry. Whatever the interrupted run says must be true of the node; a rerun
// converges to B.
func TestFaultsRebootDuringCycleWatch(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	faultSlot(t)
	node := bed.Node(t)
	cache := t.TempDir()
	treeA, env := faultTree(t, "ssh", node, node.SSHPort, "A", cache)
	treeB, _ := faultTree(t, "ssh", node, node.SSHPort, "B", cache)
	genA := converged(t, "ssh", node, env, treeA, switchyard(t, env, "ssh", "apply", "--tree", treeA, "--output", "json"))

	applyB := []string{"ssh", "apply", "--tree", treeB, "--output", "json"}
	b := startFault(t, append(env, "DEPLOY_CYCLE_WINDOWS=20"), applyB...)
	b.await(t, 5*time.Minute, "cycle-watch start", phaseIs("cycle-watch", "start"))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := node.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	r := b.wait(t, 10*time.Minute)
	after := nodeState(t, node)
	t.Logf("rebooted during cycle-watch: exit %d; node now %v; %q", r.code, after, logMsgs(r))
	if v := verdicts(t, r)["web1"]; v != nil && v["ok"] == true && v["toplevel"] != after[0] {
		t.Errorf("the interrupted run says ok with %v, but the node runs %s", v["toplevel"], after[0])
	}
	genB := converged(t, "ssh", node, env, treeB, switchyard(t, env, applyB...))
	if genB == genA {
		t.Errorf("the rerun left the node on generation A %s", genA)
	}
}

// tfKillPoint is a point of a `tf apply` to kill the deployer at. A tf run carries
// no phase events (the body runs inside the provider, under OpenTofu, whose -json
// stream has only its own hooks, and the provider's phase lines are debug logs
// OpenTofu keeps to itself): a point is either one of OpenTofu's hooks, seen as a
// log event, or a phase's first mark on the node, polled there.
type tfKillPoint struct {
	name    string                                       // the phase it falls in
	closure string                                       // the test closure deployed ("": healthy)
	event   func(map[string]any) bool                    // a log event of the run, or
	node    func(lock, unit bool, cur, prof string) bool // what the node shows
}

var tfKillPoints = []tfKillPoint{
	// OpenTofu's "Creating..." hook: the provider has been handed the resource and
	// begins the deploy body with its build.
	{name: "build", event: func(e map[string]any) bool {
		return e["kind"] == "log" && strings.HasPrefix(fmt.Sprint(e["msg"]), "web1: tofu: ") && strings.Contains(fmt.Sprint(e["msg"]), ": Creating...")
	}},
	// The node's deploy lock appears: taken at the start of push, before the copy.
	{name: "push", node: func(lock, unit bool, cur, prof string) bool { return lock }},
	// The switch's transient unit is loaded.
	{name: "switch", node: func(lock, unit bool, cur, prof string) bool { return unit }},
	// The node runs the new system while its profile is not set yet: the switch
	// activated; switch-result, confirm or the watches run.
	{name: "switch-result", node: func(lock, unit bool, cur, prof string) bool { return cur != "" && prof != cur }},
	// The profile names the running system: finalize has begun. What is left of the
	// run then (the boot entry, conclude, OpenTofu's state) can take less time than
	// the probe: this point deploys slow-bootloader, whose boot entry takes 3 s.
	{name: "finalize", closure: "slow-bootloader", node: func(lock, unit bool, cur, prof string) bool { return cur != "" && prof == cur }},
	// OpenTofu's "Creation complete" hook: the body concluded (lock released), the
	// state is being written.
	{name: "conclude", event: func(e map[string]any) bool {
		return e["kind"] == "log" && strings.HasPrefix(fmt.Sprint(e["msg"]), "web1: tofu: ") && strings.Contains(fmt.Sprint(e["msg"]), "Creation complete")
	}},
}

// TestFaultsKillTFApply: `tf apply` SIGKILLed (with OpenTofu and its provider, one
// process group) at each kill point a tf run shows (tfKillPoints), then a rerun of
// `tf apply` converges, its OpenTofu state matching the node.
func TestFaultsKillTFApply(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	cache := t.TempDir()
	for _, kp := range tfKillPoints {
		t.Run(kp.name, func(t *testing.T) {
			t.Parallel()
			faultSlot(t)
			node := bed.Node(t)
			tree, env := faultTreeOf(t, "tf", kp.closure, node, node.SSHPort, "A", cache)
			apply := []string{"tf", "apply", "--tree", tree, "--output", "json"}
			b := startFault(t, env, apply...)
			if kp.event != nil {
				b.await(t, 5*time.Minute, kp.name+" kill point", kp.event)
			} else {
				awaitNode(t, b, node, kp.name, kp.node)
			}
			b.killGroup(t)
			t.Logf("killed at %s; node then: %v", kp.name, nodeState(t, node))
			providerGone(t, node)
			converged(t, "tf", node, env, tree, switchyard(t, env, apply...))
		})
	}
}

// awaitNode polls the node until cond holds of it, failing when the run ends first.
func awaitNode(t *testing.T, b *bgRun, node *testbed.Node, what string, cond func(lock, unit bool, cur, prof string) bool) {
	t.Helper()
	const probe = `test -e /run/switchyard/lock && echo lock
systemctl list-units --all --no-legend 'switchyard-switch-*' | grep -q . && echo unit
echo "cur=$(readlink -e /run/current-system)"
echo "prof=$(readlink -e /nix/var/nix/profiles/system)"
true`
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-b.done:
			t.Fatalf("the run ended (%v) before the %s kill point; stdout:\n%s", b.err, what, b.stdout.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := node.Exec(ctx, "sh", "-c", probe)
		cancel()
		if err == nil {
			var lock, unit bool
			var cur, prof string
			for _, l := range strings.Split(out, "\n") {
				switch {
				case l == "lock":
					lock = true
				case l == "unit":
					unit = true
				case strings.HasPrefix(l, "cur="):
					cur = strings.TrimPrefix(l, "cur=")
				case strings.HasPrefix(l, "prof="):
					prof = strings.TrimPrefix(l, "prof=")
				}
			}
			if cond(lock, unit, cur, prof) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no %s kill point within 5m", what)
}

// providerGone waits until the process holding the node's deploy lock, if any, has
// ended. Under tf that is the provider, which OpenTofu started in a process group
// of its own: it dies after OpenTofu (killed by Pdeathsig when switchyard dies), not
// with the group the test kills, and a rerun while it still ends its body is
// refused by the lock, as it should be.
func providerGone(t *testing.T, node *testbed.Node) {
	t.Helper()
	out, err := node.Exec(context.Background(), "cat", "/run/switchyard/lock")
	f := strings.Fields(out)
	if err != nil || len(f) < 4 {
		return
	}
	pid, err := strconv.Atoi(f[3])
	if err != nil || pid <= 0 {
		return
	}
	start := time.Now()
	for syscall.Kill(pid, 0) == nil {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the lock's holder (pid %d) outlived switchyard by 30 s", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the lock's holder (pid %d) ended %s after the kill", pid, time.Since(start).Round(time.Millisecond))
}
