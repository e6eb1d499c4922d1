package testbed_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Each test closure is copied to a fresh node with nix-copy-closure, switched with
// its own switch-to-configuration, and must leave exactly the systemd state it exists
// to produce. The deploy-body tests rely on these behaviours.

// deployed launches a node, builds attr, copies it and switches; it returns the node,
// the toplevel and the switch's exit code.
func deployed(t *testing.T, attr string) (*testbed.Node, string, int) {
	t.Helper()
	bed := testbed.Require(t)
	t.Parallel()
	top := bed.Build(t, attr, "")
	node := bed.Node(t)
	node.CopyClosure(t, top)
	if out := node.MustExec(t, "nix-store", "--check-validity", "--print-invalid", top); strings.TrimSpace(out) != "" {
		t.Fatalf("%s not valid on the node after the copy: %q", top, out)
	}
	return node, top, node.Switch(t, top, "switch")
}

func wantProps(t *testing.T, node *testbed.Node, unit string, want map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	got := node.UnitProperties(t, unit, keys...)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %s=%q, want %q", unit, k, got[k], v)
		}
	}
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestScenarioHealthy(t *testing.T) {
	node, top, code := deployed(t, "healthy")
	if code != 0 {
		t.Fatalf("switch exited %d, want 0", code)
	}
	if got := node.Readlink(t, "/run/current-system"); got != top {
		t.Errorf("/run/current-system -> %q, want %q", got, top)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got != top {
		t.Errorf("boot entry -> %q, want %q", got, top)
	}
	wantProps(t, node, "hello.service", map[string]string{"ActiveState": "active", "SubState": "running", "LoadState": "loaded"})
	if got := strings.TrimSpace(node.MustExec(t, "systemctl", "list-units", "--failed", "--no-legend", "--plain")); got != "" {
		t.Errorf("failed units on a healthy node: %q", got)
	}
	if out := node.MustExec(t, "ls", top+"/sw/bin"); !strings.Contains(out, "switchyard-hello") {
		t.Errorf("sw/bin lacks switchyard-hello: %q", out)
	}
	// Test traffic stays on loopback: a node has no network but its own lo.
	links := strings.Fields(node.MustExec(t, "ls", "/sys/class/net"))
	if strings.Join(links, " ") != "lo" {
		t.Errorf("node has network interfaces %v; test nodes must have only lo", links)
	}
}

func TestScenarioFailedUnit(t *testing.T) {
	node, top, code := deployed(t, "failed-unit")
	if code != 4 {
		t.Fatalf("switch exited %d, want 4 (units failed)", code)
	}
	if got := node.Readlink(t, "/run/current-system"); got != top {
		t.Errorf("/run/current-system -> %q, want %q", got, top)
	}
	wantProps(t, node, "broken.service", map[string]string{"ActiveState": "failed", "Result": "exit-code", "ExecMainStatus": "3"})
	wantProps(t, node, "hello.service", map[string]string{"ActiveState": "active"})
	if link := node.Readlink(t, "/etc/systemd/system/multi-user.target.wants/broken.service"); link == "" {
		t.Errorf("broken.service is not wanted by multi-user.target on the node")
	}
}

func TestScenarioRestartLoop(t *testing.T) {
	node, _, code := deployed(t, "restart-loop")
	if code != 0 {
		t.Fatalf("switch exited %d, want 0 (a loop is not a failed start)", code)
	}
	env := node.UnitProperties(t, "flappy.service", "Environment")["Environment"]
	if !strings.Contains(env, "DEPLOY_LOOP_BUDGET=30") {
		t.Errorf("flappy.service Environment=%q lacks DEPLOY_LOOP_BUDGET=30", env)
	}
	restarts := func() int {
		n, _ := strconv.Atoi(node.UnitProperties(t, "flappy.service", "NRestarts")["NRestarts"])
		return n
	}
	first := restarts()
	eventually(t, 30*time.Second, "NRestarts of flappy.service did not rise by 3", func() bool { return restarts() >= first+3 })
	if st := node.UnitProperties(t, "flappy.service", "ActiveState")["ActiveState"]; st == "failed" {
		t.Errorf("flappy.service hit its start limit; it must loop forever")
	}
}

func TestScenarioConditionSkipped(t *testing.T) {
	node, _, code := deployed(t, "condition-skipped")
	if code != 0 {
		t.Fatalf("switch exited %d, want 0", code)
	}
	wantProps(t, node, "only-on-metal.service", map[string]string{"ActiveState": "inactive", "ConditionResult": "no"})
	if ts := node.UnitProperties(t, "only-on-metal.service", "ConditionTimestamp")["ConditionTimestamp"]; ts == "" {
		t.Errorf("only-on-metal.service was never checked: empty ConditionTimestamp")
	}
}

func TestScenarioNeverActivates(t *testing.T) {
	node, top, code := deployed(t, "never-activates")
	if code != 0 {
		t.Fatalf("switch exited %d, want 0 (it claims success)", code)
	}
	if got := node.Readlink(t, "/run/current-system"); got == top {
		t.Errorf("/run/current-system points at %s although the switch never activated", top)
	}
	if got := node.Readlink(t, "/boot/switchyard-default"); got == top {
		t.Errorf("boot entry points at %s although the switch never activated", top)
	}
	if st := node.UnitProperties(t, "hello.service", "LoadState")["LoadState"]; st != "not-found" {
		t.Errorf("hello.service LoadState=%q: the closure's units were installed", st)
	}
}

func TestScenarioSecretChain(t *testing.T) {
	node, top, code := deployed(t, "secret-chain")
	if code != 0 {
		t.Fatalf("switch exited %d, want 0", code)
	}
	chain := strings.Fields(node.MustExec(t, "cat", top+"/etc/switchyard/chain"))
	if strings.Join(chain, " ") != "secret-agent.service secrets-ready.service" {
		t.Fatalf("chain = %q", chain)
	}
	// Right after the switch the tail is still waiting for the secret...
	if st := node.UnitProperties(t, "secrets-ready.service", "ActiveState")["ActiveState"]; st == "active" {
		t.Errorf("secrets-ready.service already active right after the switch; the chain must converge later")
	}
	// ...and the chain converges within seconds, head first.
	eventually(t, 30*time.Second, "chain never converged", func() bool {
		return node.UnitProperties(t, "secrets-ready.service", "ActiveState")["ActiveState"] == "active"
	})
	head := node.UnitProperties(t, "secret-agent.service", "ActiveState", "ActiveEnterTimestampMonotonic")
	tail := node.UnitProperties(t, "secrets-ready.service", "ActiveEnterTimestampMonotonic")
	if head["ActiveState"] != "active" {
		t.Errorf("chain head ActiveState=%q", head["ActiveState"])
	}
	h, _ := strconv.ParseInt(head["ActiveEnterTimestampMonotonic"], 10, 64)
	tl, _ := strconv.ParseInt(tail["ActiveEnterTimestampMonotonic"], 10, 64)
	if !(h > 0 && tl > h) {
		t.Errorf("chain order: head active at %d, tail at %d", h, tl)
	}
}

func TestScenarioForeignPermanentMAC(t *testing.T) {
	node, top, code := deployed(t, "foreign-mac")
	if code != 0 {
		t.Fatalf("switch exited %d, want 0", code)
	}
	link := node.MustExec(t, "cat", top+"/etc/systemd/network/10-uplink.link")
	if !strings.Contains(link, "PermanentMACAddress=02:5e:1f:de:ad:01") {
		t.Fatalf(".link file lacks the PermanentMACAddress match: %q", link)
	}
	// No interface of the node has that address (permanent or current).
	out := node.MustExec(t, "ip", "-o", "-d", "link", "show")
	if strings.Contains(strings.ToLower(out), "02:5e:1f:de:ad:01") {
		t.Errorf("node has the .link file's MAC address: %s", out)
	}
	if !strings.Contains(out, "link/") {
		t.Errorf("could not read the node's links: %q", out)
	}
}

func TestScenarioSpawnFault(t *testing.T) {
	node, _, code := deployed(t, "spawn-fault")
	if code != 4 {
		t.Fatalf("switch exited %d, want 4 (units failed)", code)
	}
	// systemd failed before exec for host reasons: exec-stage statuses, not the program's.
	wantProps(t, node, "numa-pinned.service", map[string]string{"ActiveState": "failed", "ExecMainCode": "1", "ExecMainStatus": "242"})
	wantProps(t, node, "realtime.service", map[string]string{"ActiveState": "failed", "ExecMainCode": "1", "ExecMainStatus": "214"})
	wantProps(t, node, "hello.service", map[string]string{"ActiveState": "active"})
}

func TestScenarioChainVariants(t *testing.T) {
	t.Run("broken head", func(t *testing.T) {
		node, _, code := deployed(t, "secret-chain-broken")
		if code != 4 {
			t.Fatalf("switch exited %d, want 4", code)
		}
		wantProps(t, node, "secret-agent.service", map[string]string{"ActiveState": "failed"})
	})
	t.Run("stalled", func(t *testing.T) {
		node, _, code := deployed(t, "secret-chain-stalled")
		if code != 0 {
			t.Fatalf("switch exited %d, want 0", code)
		}
		time.Sleep(3 * time.Second)
		wantProps(t, node, "secret-agent.service", map[string]string{"ActiveState": "active"})
		wantProps(t, node, "secrets-ready.service", map[string]string{"ActiveState": "inactive"})
	})
}
