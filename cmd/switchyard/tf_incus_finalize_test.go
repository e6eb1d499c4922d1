package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 31 item 10: a finalize that fails says why. Through tf-incus, a toplevel
// without stage 2 activates and passes its verdict, then finalize cannot point the
// container's /sbin/init at it: the deployment fails with exit 3, and the reason
// (SPEC 4.5: a log event names the failure) reaches the operator through the
// provider's diagnostics, not only "verdict failed (exit 3)".
func TestTFIncusFinalizeFailureSaysWhy(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	project := testProject(t)
	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{Closure: "no-init",
		Nodes: []plantest.Node{{Name: "web1", Image: bed.Image}}, Methods: inProject(project)})
	r := switchyard(t, []string{"DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}, "tf-incus", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 3)
	var named bool
	for _, e := range r.events {
		if e["kind"] == "log" && e["level"] == "error" && strings.HasPrefix(fmt.Sprint(e["msg"]), "web1: ") &&
			strings.Contains(fmt.Sprint(e["msg"]), "finalize: setting the system profile and boot entry: install the boot entry") {
			named = true
		}
	}
	if !named {
		t.Errorf("no error event names finalize's failure (install the boot entry):\n%s\nstderr:\n%s", strings.Join(logMsgs(r), "\n"), r.stderr)
	}
}
