package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// tfPush is the push line of node in r, as push reads it; a missing one is an error,
// not fatal, so that the checks after it still run.
func tfPush(t *testing.T, r run, node string) pushLine {
	t.Helper()
	for _, m := range logMsgs(r) {
		if g := pushLinePattern.FindStringSubmatch(m); g != nil && g[1] == node {
			return push(t, r, node)
		}
	}
	t.Errorf("no push line of %s in the events:\n%s", node, strings.Join(logMsgs(r), "\n"))
	return pushLine{}
}

// Issue 34 items 1 and 2 for the OpenTofu methods, on one node and one cache:
//   - substitutes on the node: the deployment's copy first fetches from the node's
//     own binary caches and streams the rest, its push line among the run's events
//     as the ssh method's; apply --no-substitute, and the node's substituteOnNode =
//     false, stream everything;
//   - plan dry-activates a changed node: the plan event and the text name the units
//     a switch would stop, leave alone and start; nothing is activated.
func TestTFPlanDryActivate(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	g := newGenBedFor(t, bed, "tf", "ng-switch")
	cache := newNodeCache(t, g.node)
	for _, gen := range []string{"a", "c", "d"} {
		cache.Hold(t, testbed.BuildClosure(t, "ng-switch", "mode-web1-"+gen))
	}
	apply := func(gen string, args ...string) pushLine {
		t.Helper()
		return g.applyPushed(t, tfPush, gen, args...)
	}

	// Everything the node lacks is in its cache: nothing streamed.
	if p := apply("a"); p.missing == 0 || p.fromCaches != p.missing || p.sent != 0 || p.cachesFailed {
		t.Errorf("cache up: %q; want every missing path from the node's caches, none sent", p.msg)
	}

	// echo.service runs (started by hand, see TestDeploySocketActivatedServiceChanged):
	// a switch to b, which changes it, would stop it and its socket, then start the
	// socket alone; keeper.service changed and says X-RestartIfChanged=false.
	g.node.MustExec(t, "systemctl", "start", "echo.service")
	waitActive(t, g.node, "echo.service")
	running := g.node.Readlink(t, "/run/current-system")
	r := g.run(t, "b", "plan")
	wantCode(t, r, 0)
	var would map[string]any
	for _, e := range r.events {
		if e["kind"] == "plan" && e["node"] == "web1" && e["changed"] == true {
			would, _ = e["would"].(map[string]any)
		}
	}
	want := map[string]string{"stop": "[echo.service echo.socket]", "not_restarted": "[keeper.service]",
		"reload": "[]", "restart": "[]", "start": "[echo.socket]"}
	for k, v := range want {
		if fmt.Sprint(would[k]) != v {
			t.Errorf("plan event would.%s = %v, want %s (would: %v)", k, would[k], v, would)
		}
	}
	if got := g.node.Readlink(t, "/run/current-system"); got != running {
		t.Errorf("plan activated something: /run/current-system %s, was %s", got, running)
	}
	if st := g.node.UnitProperties(t, "echo.service", "ActiveState")["ActiveState"]; st != "active" {
		t.Errorf("plan stopped echo.service: %s", st)
	}
	text := switchyard(t, append([]string{"DEPLOYMENT=" + g.submission("b")}, g.env...), "tf", "plan", "--tree", g.tree)
	wantCode(t, text, 0)
	if !strings.Contains(text.stdout, "web1:   would NOT stop the following changed units: keeper.service") ||
		!strings.Contains(text.stdout, "web1:   would start the following units: echo.socket") {
		t.Errorf("text plan:\n%s", text.stdout)
	}

	// --no-substitute streams every missing path, though the cache holds them.
	if p := apply("c", "--no-substitute"); p.missing == 0 || p.sent != p.missing || p.fromCaches != 0 {
		t.Errorf("--no-substitute: %q; want every missing path sent, none from the caches", p.msg)
	}
	// ... as does the node's own substituteOnNode = false.
	setNodeSubstitute(t, g.tree, false)
	if p := apply("d"); p.missing == 0 || p.sent != p.missing || p.fromCaches != 0 {
		t.Errorf("substituteOnNode = false: %q; want every missing path sent, none from the caches", p.msg)
	}
}
