package main_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// Issue 11 item 7, tf-incus: DEPLOY_VERDICT_ONLY=1 apply with a changed closure in the
// submission judges the instance as it runs (pass "verdict-only", switch skipped)
// through the Incus API, and switches nothing.
func TestTFIncusVerdictOnlyApply(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	project := testProject(t)
	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{Nodes: []plantest.Node{{Name: "web1", Image: bed.Image}}, Methods: inProject(project)})
	cache := "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()
	// Read through the Incus API, not the incus CLI (whose exec under load has lost
	// its output).
	client := api.New("")
	running := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out strings.Builder
		code, err := client.Exec(ctx, "web1", project, api.ExecRequest{Command: []string{"readlink", "/run/current-system"}}, nil, &out, nil)
		if err != nil || code != 0 {
			t.Fatalf("web1: readlink /run/current-system: exit %d, %v", code, err)
		}
		return strings.TrimSpace(out.String())
	}

	r := switchyard(t, []string{cache},
		"tf-incus", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	first, _ := verdicts(t, r)["web1"]["toplevel"].(string)
	if first == "" || running() != first {
		t.Fatalf("first apply: verdict %v\nstderr:\n%s", verdicts(t, r)["web1"], r.stderr)
	}

	changed := `DEPLOYMENT={"deployment-method":{"tf-incus":{"applications":{"hello":{"settings":{"greeting":"hey"}}}}}}`
	r = switchyard(t, []string{changed, cache, "DEPLOY_VERDICT_ONLY=1"}, "tf-incus", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	v := verdicts(t, r)["web1"]
	if v == nil || v["pass"] != "verdict-only" || v["switch"].(map[string]any)["result"] != "skipped" ||
		v["toplevel"] != first || v["target"] != "incus "+project+"/web1" {
		t.Errorf("DEPLOY_VERDICT_ONLY=1 apply: verdict %v, want pass verdict-only, switch skipped, toplevel %s", v, first)
	}
	if got := running(); got != first {
		t.Errorf("DEPLOY_VERDICT_ONLY=1 apply switched web1 to %s", got)
	}
}
