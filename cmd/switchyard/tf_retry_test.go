package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// setTreeClosure changes the test closure the tree's hello application builds (its
// `closure` setting in deployment.json, see plan/plantest), so every node of the tree
// gets a new toplevel; the rest of the tree is left as it is.
func setTreeClosure(t *testing.T, tree, closure string) { setHelloSetting(t, tree, "closure", closure) }

// setHelloSetting sets one setting of the tree's hello application in
// deployment.json: any change gives every node a new toplevel (plantest.Builder).
func setHelloSetting(t *testing.T, tree, key, value string) {
	t.Helper()
	p := filepath.Join(tree, "deployment.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(b, &def); err != nil {
		t.Fatalf("deployment.json: %v", err)
	}
	hello, _ := def["applications"].(map[string]any)["hello"].(map[string]any)
	settings, _ := hello["settings"].(map[string]any)
	if settings == nil {
		t.Fatalf("deployment.json has no applications.hello.settings: %s", b)
	}
	settings[key] = value
	if b, err = json.MarshalIndent(def, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// namesFailedNode: a json run reports the node's failure as an error event naming it,
// and ends with a summary of one failed node, exit 1.
func namesFailedNode(r run, node string) bool {
	named := false
	for _, e := range r.events {
		if e["kind"] == "log" && e["level"] == "error" && e["node"] == node &&
			strings.Contains(fmt.Sprint(e["msg"]), node+": verdict failed") {
			named = true
		}
	}
	sum := r.events[len(r.events)-1]
	return named && sum["failed"] == 1.0 && sum["exit_code"] == 1.0
}

// SPEC 7 / issue 6: retry after a failed update. A node applied healthy, then updated
// to a closure whose unit fails: apply exits 1 naming it; the state records the failed
// verdict, the new toplevel and the healthy one as previous; the node runs the new
// toplevel. A plan right after shows the node changed and the next apply retries it
// (still exit 1). Back to the healthy closure: apply exits 0, the state is ok and a plan
// changes nothing.
func TestTFApplyFailedUpdateRetried(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "tf", "healthy", map[string]*testbed.Node{"web1": node})
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}

	// 1. healthy.
	r := switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	v := verdicts(t, r)["web1"]
	if v == nil || v["ok"] != true {
		t.Fatalf("healthy apply: verdict %v\nstderr:\n%s", v, r.stderr)
	}
	healthy, _ := v["toplevel"].(string)
	if healthy == "" {
		t.Fatalf("healthy apply: no toplevel in %v", v)
	}
	st := tofuState(t, env, tree)["web1"]
	if st == nil || st["ok"] != true || st["exit_code"] != 0.0 || st["toplevel"] != healthy {
		t.Fatalf("state after the healthy apply: %v", st)
	}
	if got := node.Readlink(t, "/run/current-system"); got != healthy {
		t.Fatalf("node runs %q, want %s", got, healthy)
	}
	healthyConf := st["nixos_conf"]

	// 2. update to a closure with a failing unit.
	setTreeClosure(t, tree, "failed-unit")
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 1)
	if !namesFailedNode(r, "web1") {
		t.Errorf("failed update: apply does not name the node:\n%s", r.stdout)
	}
	v = verdicts(t, r)["web1"]
	if v == nil || v["ok"] != false {
		t.Errorf("failed update: verdict %v", v)
	}
	st = tofuState(t, env, tree)["web1"]
	if st == nil || st["ok"] != false || st["exit_code"] != 1.0 || !strings.Contains(fmt.Sprint(st["verdict"]), `"ok":false`) {
		t.Fatalf("state does not record the failed verdict: %v", st)
	}
	failed, _ := st["toplevel"].(string)
	if failed == "" || failed == healthy || !strings.Contains(failed, "failed-unit") {
		t.Errorf("state toplevel %q after the failed update, want the new (failed-unit) toplevel, not %s", failed, healthy)
	}
	if st["previous"] != healthy {
		t.Errorf("state previous %v after the failed update, want the healthy %s", st["previous"], healthy)
	}
	if st["nixos_conf"] == healthyConf {
		t.Errorf("state nixos_conf unchanged by the update: %v", st["nixos_conf"])
	}
	if v != nil && v["toplevel"] != failed {
		t.Errorf("verdict toplevel %v, state toplevel %s", v["toplevel"], failed)
	}
	if got := node.Readlink(t, "/run/current-system"); got != failed {
		t.Errorf("node runs %q after the failed update, want %s", got, failed)
	}

	// 3. a plan right after shows the failed node changed: it will be retried.
	r = switchyard(t, env, "tf", "plan", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if p := planEvents(r); len(p) != 1 || !p["web1"] {
		t.Errorf("plan after the failed update: %v, want web1 changed\n%s", p, r.stdout)
	}

	// 4. the next apply retries the node, and it still fails.
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 1)
	if !namesFailedNode(r, "web1") {
		t.Errorf("retry: apply does not name the node:\n%s", r.stdout)
	}
	if v := verdicts(t, r)["web1"]; v == nil || v["ok"] != false || v["toplevel"] != failed {
		t.Errorf("retry verdict %v, want failed on %s", v, failed)
	}
	if countLogs(r, "web1", "tofu:") == 0 {
		t.Errorf("the retry did not touch web1: %q", logMsgs(r))
	}
	if countLogs(r, "web1", "Modifying") == 0 {
		t.Errorf("no modification of web1 in the retry's log: %q", logMsgs(r))
	}
	st = tofuState(t, env, tree)["web1"]
	if st == nil || st["ok"] != false || st["exit_code"] != 1.0 || st["toplevel"] != failed {
		t.Errorf("state after the retry: %v", st)
	}
	// The retry on the toplevel the node already runs keeps the generation before it.
	if st != nil && st["previous"] != healthy {
		t.Errorf("state previous %v after the retry, want the healthy %s", st["previous"], healthy)
	}
	if got := node.Readlink(t, "/run/current-system"); got != failed {
		t.Errorf("node runs %q after the retry, want %s", got, failed)
	}

	// 5. back to healthy.
	setTreeClosure(t, tree, "healthy")
	r = switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if v := verdicts(t, r)["web1"]; v == nil || v["ok"] != true || v["toplevel"] != healthy {
		t.Errorf("back to healthy: verdict %v, want ok on %s", v, healthy)
	}
	st = tofuState(t, env, tree)["web1"]
	if st == nil || st["ok"] != true || st["exit_code"] != 0.0 || st["toplevel"] != healthy || st["nixos_conf"] != healthyConf {
		t.Errorf("state back to healthy: %v", st)
	}
	if st != nil && st["previous"] != failed {
		t.Errorf("state previous %v back to healthy, want the failed %s", st["previous"], failed)
	}
	if got := node.Readlink(t, "/run/current-system"); got != healthy {
		t.Errorf("node runs %q back to healthy, want %s", got, healthy)
	}
	r = switchyard(t, env, "tf", "plan", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if p := planEvents(r); len(p) != 1 || p["web1"] {
		t.Errorf("plan after the healthy apply: %v, want web1 unchanged\n%s", p, r.stdout)
	}
}
