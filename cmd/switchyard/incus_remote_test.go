package main_test

import (
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus/incustest"
)

// The incus transport through a remote of the Incus client configuration: the
// test bed's daemon on a loopback HTTPS address, a trusted client certificate,
// the server certificate pinned. The daemon's HTTPS address is global: this is
// the package's only test that changes it, and its steps run one after another.
func TestDeployIncusRemote(t *testing.T) {
	node, top := setup(t, "healthy")
	other := testbed.Require(t).Build(t, "healthy", "incus-remote-2")
	remote := incustest.NewRemote(t, "yard")
	env := []string{"INCUS_CONF=" + remote.Dir}

	r := switchyard(t, env, "deploy", "--transport", "incus", "--target", "yard:"+node.Name, "--project", "default",
		"--toplevel", top, "--output", "json")
	wantCode(t, r, 0)
	v := r.verdict(t)
	if v["ok"] != true || v["exit_code"] != 0.0 || v["reachable"] != true || v["target"] != "incus yard:default/"+node.Name {
		t.Errorf("verdict: %v", v)
	}
	if sw, _ := v["switch"].(map[string]any); sw["result"] != "ok" || sw["exit_code"] != 0.0 {
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

	// A server certificate that is not the pinned one: refused before anything
	// changed (exit 2), like an SSH host key mismatch.
	impostor, _ := incustest.SelfSigned(t, "impostor")
	r = switchyard(t, []string{"INCUS_CONF=" + remote.WithServerCert(t, impostor)}, "deploy", "--transport", "incus",
		"--target", "yard:"+node.Name, "--toplevel", other, "--output", "json")
	wantCode(t, r, 2)
	if v := r.verdict(t); v["ok"] != false || !strings.Contains(r.stdout, "pinned") {
		t.Errorf("a wrong pin: verdict %v\nstdout:\n%s", v, r.stdout)
	} else {
		t.Logf("a wrong pin: verdict %v", v)
	}
	if got := node.Readlink(t, "/run/current-system"); got != top {
		t.Errorf("after a refused deploy, /run/current-system -> %q, want %q", got, top)
	}

	// A remote the configuration does not have: refused, naming it.
	r = switchyard(t, env, "deploy", "--transport", "incus", "--target", "elsewhere:"+node.Name, "--toplevel", top)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, `incus remote "elsewhere" is not in the Incus client configuration`) {
		t.Errorf("an unknown remote: stderr %q", r.stderr)
	}
}
