package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 34 item 6: `ssh status` reads, per node, what the plan expects, what the node
// has (running, profile, boot entry, its last receipt) and whether it is ready, names
// each disagreement, and exits 1 when any node disagrees.
func TestSSHStatus(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	g := newGenBed(t, bed)
	status := func(gen string, args ...string) (run, map[string]any) {
		t.Helper()
		r := g.run(t, gen, "status", args...)
		for _, e := range r.events {
			if e["kind"] == "status" && e["node"] == "web1" {
				return r, e
			}
		}
		t.Fatalf("no status event: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		return r, nil
	}
	disagreements := func(s map[string]any) string { return fmt.Sprint(s["disagreements"]) }

	// A node never applied: nothing runs, no receipt.
	r, s := status("a", "--cached")
	wantCode(t, r, 1)
	if d := disagreements(s); !strings.Contains(d, "drift: runs <none>") || !strings.Contains(d, "no receipt") || !strings.Contains(d, "no verdict") {
		t.Errorf("fresh node: disagreements %s", d)
	}

	r = g.run(t, "a", "apply")
	wantCode(t, r, 0)
	a := fmt.Sprint(r.verdict(t)["toplevel"])

	// Applied: the three truths agree, with a fresh verdict and with the receipt's.
	r, s = status("a")
	wantCode(t, r, 0)
	ready, _ := s["ready"].(map[string]any)
	present, _ := s["present"].(map[string]any)
	if s["ok"] != true || ready["source"] != "fresh" || ready["ok"] != true || present["receipt_toplevel"] != a || present["boot_entry"] != a {
		t.Errorf("applied node: status %v", s)
	}
	r, s = status("a", "--cached")
	wantCode(t, r, 0)
	if ready, _ := s["ready"].(map[string]any); ready["source"] != "cached" || ready["ok"] != true {
		t.Errorf("--cached: ready %v, want the receipt's ok verdict", ready)
	}

	// A test activation of b: the node runs b, its profile and boot entry stay on a,
	// and the plan (of a) is not what runs.
	r = g.run(t, "b", "apply", "--mode", "test")
	wantCode(t, r, 0)
	r, s = status("a", "--cached")
	wantCode(t, r, 1)
	d := disagreements(s)
	for _, want := range []string{"drift: runs ", "the plan expects " + a, "system profile is " + a, "boot entry boots " + a} {
		if !strings.Contains(d, want) {
			t.Errorf("after --mode test: disagreements %s lack %q", d, want)
		}
	}

	// Someone else's generation: the node runs what no receipt names.
	g.node.MustExec(t, "sh", "-c", "nix-env -p /nix/var/nix/profiles/system --set \"$1\" && \"$1/bin/switch-to-configuration\" switch", "sh", a)
	r, s = status("a", "--cached")
	if d := disagreements(s); r.code != 1 || !strings.Contains(d, "runs a generation no receipt names") {
		t.Errorf("switched by hand: exit %d, disagreements %s", r.code, d)
	}
}
