package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 15 item 4: drift in the OpenTofu methods. A node deployed twice is rolled
// back by hand (nix-env --rollback, then switch-to-configuration switch): tf plan
// shows the drift, with the toplevel found, and the node changed; tf apply deploys
// the planned generation again, with a passing verdict, and the node's running
// system and profile agree with the state. A node that cannot be read during the
// refresh keeps its state and is named; nothing is dropped.
func TestTFDrift(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "tf", "healthy", map[string]*testbed.Node{"web1": node})
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	apply := func(code int) map[string]any {
		t.Helper()
		r := switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
		wantCode(t, r, code)
		v := verdicts(t, r)["web1"]
		if v == nil {
			t.Fatalf("no verdict:\n%s", r.stderr)
		}
		return v
	}
	first := apply(0)["toplevel"]
	setHelloSetting(t, tree, "greeting", "hello again")
	v := apply(0)
	planned := v["toplevel"]
	if planned == first || node.Readlink(t, "/run/current-system") != planned {
		t.Fatalf("second generation %v (first %v), node runs %q", planned, first, node.Readlink(t, "/run/current-system"))
	}

	// By hand: back to the first generation.
	node.MustExec(t, "nix-env", "--profile", "/nix/var/nix/profiles/system", "--rollback")
	node.MustExec(t, "/nix/var/nix/profiles/system/bin/switch-to-configuration", "switch")
	if got := node.Readlink(t, "/run/current-system"); got != first {
		t.Fatalf("the rollback by hand left the node on %q, want %v", got, first)
	}

	r := switchyard(t, env, "tf", "plan", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if p := planEvents(r); !p["web1"] {
		t.Errorf("plan after the rollback by hand: %v, want web1 changed", p)
	}
	want := fmt.Sprintf("web1: drift: runs %s, its system profile is %s", first, first)
	if msgs := strings.Join(logMsgs(r), "\n"); !strings.Contains(msgs, want) || !strings.Contains(msgs, fmt.Sprintf("not %s", planned)) {
		t.Errorf("plan logs lack %q (and the planned %v):\n%s", want, planned, msgs)
	}

	v = apply(0)
	if v["ok"] != true || v["toplevel"] != planned || v["switch"].(map[string]any)["result"] != "ok" {
		t.Errorf("apply after the drift: %v, want %v switched to again", v, planned)
	}
	for _, p := range []string{"/run/current-system", "/nix/var/nix/profiles/system"} {
		if got := node.Readlink(t, p); got != planned {
			t.Errorf("%s -> %q after the apply, want %v", p, got, planned)
		}
	}
	if st := tofuState(t, env, tree)["web1"]; st == nil || st["toplevel"] != planned || st["drift"] != "" || st["ok"] != true {
		t.Errorf("state after the apply: %v", st)
	}
	r = switchyard(t, env, "tf", "plan", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if p := planEvents(r); p["web1"] {
		t.Errorf("plan after the restore: %v, want nothing to change", p)
	}

	// Unreachable during the refresh: sshd stopped.
	node.MustExec(t, "systemctl", "stop", "ssh.socket", "ssh.service")
	t.Cleanup(func() { node.Exec(t.Context(), "systemctl", "start", "ssh.service") })
	r = switchyard(t, env, "tf", "plan", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if msgs := strings.Join(logMsgs(r), "\n"); !strings.Contains(msgs, "web1: refresh: the node could not be read") {
		t.Errorf("plan with web1 unreachable does not name it:\n%s", msgs)
	}
	if st := tofuState(t, env, tree)["web1"]; st == nil || st["toplevel"] != planned {
		t.Errorf("state with web1 unreachable: %v", st)
	}
}
