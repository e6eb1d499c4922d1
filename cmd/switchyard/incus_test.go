package main_test

import (
	"strings"
	"testing"
)

// The incus transport end to end: `switchyard deploy --transport incus` reaches
// the node through the Incus API alone (no SSH), copies the closure, switches and
// judges it, and finalize sets the system profile.
func TestDeployIncus(t *testing.T) {
	node, top := setup(t, "healthy")
	r := switchyard(t, nil, "deploy", "--transport", "incus", "--target", node.Name, "--toplevel", top, "--output", "json")
	wantCode(t, r, 0)
	v := r.verdict(t)
	if v["ok"] != true || v["exit_code"] != 0.0 || v["reachable"] != true || v["target"] != "incus default/"+node.Name {
		t.Errorf("verdict: %v", v)
	}
	if sw := v["switch"].(map[string]any); sw["result"] != "ok" || sw["exit_code"] != 0.0 {
		t.Errorf("switch: %v", sw)
	}
	if v["system_state"] != "running" {
		t.Errorf("system_state %v", v["system_state"])
	}
	if got := node.Readlink(t, "/run/current-system"); got != top {
		t.Errorf("/run/current-system -> %q, want %q", got, top)
	}
	if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != top {
		t.Errorf("system profile -> %q, want %q", got, top)
	}

	// A remote the Incus client configuration does not have is refused, naming it.
	r = switchyard(t, []string{"INCUS_CONF=" + t.TempDir()}, "deploy", "--transport", "incus", "--target", "prod:"+node.Name, "--toplevel", top)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, `incus remote "prod" is not in the Incus client configuration`) {
		t.Errorf("a remote target: stderr %q", r.stderr)
	}
}
