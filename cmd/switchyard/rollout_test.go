package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/tofu"
)

// rolloutBed is six fresh test-bed nodes, web1 to web6, in a tree whose builder
// makes the node named by the hello application's setting `failing` the
// failed-unit closure and every other one healthy; each node's toplevel is tagged
// by its name only, so a node whose closure does not change between runs stays on
// its generation.
type rolloutBed struct {
	method string
	names  []string
	nodes  map[string]*testbed.Node
	tree   string
	cache  string
}

func newRolloutBed(t *testing.T, bed *testbed.Bed, method string) *rolloutBed {
	b := &rolloutBed{method: method, names: []string{"web1", "web2", "web3", "web4", "web5", "web6"},
		cache: "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	b.nodes = launchNodes(t, bed, b.names)
	var spec plantest.Tree
	for _, name := range b.names {
		spec.Nodes = append(spec.Nodes, plantest.Node{Name: name, Host: "127.0.0.1", Port: b.nodes[name].SSHPort, HostKey: b.nodes[name].HostKey})
	}
	b.tree = plantest.WriteTree(t, t.TempDir(), spec)
	closures := filepath.Join(testbed.RepoRoot(), "testbed", "closures")
	builder := fmt.Sprintf(`{ configuration, plan }:
let
  hello = plan.applications.hello or { };
  closures = import %q { tag = "rollout-${plan.node}"; };
in
if (hello.failing or "") == plan.node then closures.failed-unit else closures.healthy
`, closures)
	if err := os.WriteFile(filepath.Join(b.tree, "builder.nix"), []byte(builder), 0o644); err != nil {
		t.Fatal(err)
	}
	bakeHelloSetting(t, b.tree, "failing", "")
	return b
}

// bakeHelloSetting gives the hello application of the tree's deployment.json a baked
// setting key = value, so that a submission may set it.
func bakeHelloSetting(t *testing.T, tree, key string, value any) {
	t.Helper()
	editDeployment(t, tree, func(def map[string]any) {
		def["applications"].(map[string]any)["hello"].(map[string]any)["settings"].(map[string]any)[key] = value
	})
}

// editDeployment rewrites the tree's deployment.json through edit.
func editDeployment(t *testing.T, tree string, edit func(def map[string]any)) {
	t.Helper()
	defFile := filepath.Join(tree, "deployment.json")
	raw, err := os.ReadFile(defFile)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(raw, &def); err != nil {
		t.Fatal(err)
	}
	edit(def)
	raw, _ = json.Marshal(def)
	if err := os.WriteFile(defFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// deployment is the submission: the node whose closure fails, and the rollout
// setting ("" none).
func (b *rolloutBed) deployment(failing, rollout string) string {
	branch := map[string]any{"sshKeyFile": b.nodes["web1"].KeyFile,
		"applications": map[string]any{"hello": map[string]any{"enable": true, "settings": map[string]any{"failing": failing}}}}
	if rollout != "" {
		branch["rollout"] = rollout
	}
	j, _ := json.Marshal(map[string]any{"deployment-method": map[string]any{b.method: branch}})
	return "DEPLOYMENT=" + string(j)
}

func (b *rolloutBed) run(t *testing.T, verb, failing, rollout string, args ...string) run {
	return switchyard(t, []string{b.deployment(failing, rollout), b.cache},
		append([]string{b.method, verb, "--tree", b.tree, "--output", "json"}, args...)...)
}

func (b *rolloutBed) apply(t *testing.T, failing, rollout string, args ...string) run {
	return b.run(t, "apply", failing, rollout, args...)
}

func (b *rolloutBed) running(t *testing.T, name string) string {
	return b.nodes[name].Readlink(t, "/run/current-system")
}

// untouched checks a node still runs nothing (fresh) and holds none of toplevel.
func (b *rolloutBed) untouched(t *testing.T, name, toplevel string) {
	t.Helper()
	if got := b.running(t, name); got != "" {
		t.Errorf("%s: /run/current-system -> %q, want the node untouched", name, got)
	}
	if toplevel == "" {
		return
	}
	if out, err := b.nodes[name].Exec(context.Background(), "nix-store", "--check-validity", toplevel); err == nil {
		t.Errorf("%s: the closure %s was copied: %q", name, toplevel, out)
	}
}

// accepted counts the SSH connections a node accepted.
func (b *rolloutBed) accepted(t *testing.T, name string) int {
	return strings.Count(b.nodes[name].MustExec(t, "journalctl", "--unit", "ssh.service", "--output", "cat", "--no-pager"), "Accepted publickey")
}

func rolloutSummary(t *testing.T, r run, ok, failed, code int) {
	t.Helper()
	s := r.events[len(r.events)-1]
	if s["kind"] != "summary" || s["nodes"] != 6.0 || s["ok"] != float64(ok) || s["failed"] != float64(failed) || s["exit_code"] != float64(code) {
		t.Errorf("summary %v, want %d ok, %d failed, exit %d", s, ok, failed, code)
	}
}

func wantHeld(t *testing.T, v map[string]any, reason string) {
	t.Helper()
	if v == nil || v["switch"].(map[string]any)["result"] != "held" || v["ok"] != false || v["exit_code"] != 1.0 ||
		strings.Join(strs(v["reasons"]), ";") != reason {
		t.Errorf("held verdict %v, want reason %q", v, reason)
	}
}

// The story both methods tell, on six fresh nodes under canary=1,batch=2.

// canaryFails is its first apply: web1's closure fails, so web1 (the canary) fails
// and the five others are held, untouched, each having accepted probes SSH
// connections (the ssh method's probe: 1; the tf method asks none).
func (b *rolloutBed) canaryFails(t *testing.T, probes int) {
	t.Helper()
	before := map[string]int{}
	for _, name := range b.names {
		before[name] = b.accepted(t, name)
	}
	r := b.apply(t, "web1", "canary=1,batch=2")
	wantCode(t, r, 1)
	vs := verdicts(t, r)
	if v := vs["web1"]; v["ok"] != false || v["switch"].(map[string]any)["result"] == "held" || !strings.Contains(fmt.Sprint(v["toplevel"]), "failed-unit") {
		t.Errorf("web1 (canary): %v", v)
	}
	for _, name := range b.names[1:] {
		wantHeld(t, vs[name], "held: the rollout stopped at the canary (web1 failed)")
		b.untouched(t, name, fmt.Sprint(vs[name]["toplevel"]))
		if n := b.accepted(t, name) - before[name]; n != probes {
			t.Errorf("%s: held, accepted %d SSH connections, want %d", name, n, probes)
		}
	}
	rolloutSummary(t, r, 0, 6, 1)
}

// batch2Fails is its second apply, with --rollout: web4 fails in batch 2, web6
// (batch 3) is held and untouched, the others pass; the logs name the stages and
// stopped, how the method says where the rollout stopped.
func (b *rolloutBed) batch2Fails(t *testing.T, stopped string) {
	t.Helper()
	r := b.apply(t, "web4", "", "--rollout", "canary=1,batch=2")
	wantCode(t, r, 1)
	vs := verdicts(t, r)
	for _, name := range []string{"web1", "web2", "web3", "web5"} {
		if v := vs[name]; v["ok"] != true || v["switch"].(map[string]any)["result"] != "ok" || b.running(t, name) != v["toplevel"] {
			t.Errorf("%s: verdict %v, running %q", name, v, b.running(t, name))
		}
	}
	if v := vs["web4"]; v["ok"] != false || b.running(t, "web4") != v["toplevel"] {
		t.Errorf("web4 (batch 2): %v", v)
	}
	wantHeld(t, vs["web6"], "held: the rollout stopped at batch 2 (web4 failed)")
	b.untouched(t, "web6", fmt.Sprint(vs["web6"]["toplevel"]))
	rolloutSummary(t, r, 4, 2, 1)
	msgs := strings.Join(logMsgs(r), "\n")
	for _, want := range []string{"rollout: canary of 4: web1", "rollout: batch 1 of 4: web2, web3",
		"rollout: batch 2 of 4: web4, web5", stopped} {
		if !strings.Contains(msgs, want) {
			t.Errorf("logs lack %q:\n%s", want, msgs)
		}
	}
}

// rerunCompletes is its last apply, after the fix: every node passes; the nodes
// already deployed are unchanged and don't count toward a stage (web4 is the
// canary, web6 batch 1).
func (b *rolloutBed) rerunCompletes(t *testing.T) {
	t.Helper()
	r := b.apply(t, "", "canary=1,batch=2")
	wantCode(t, r, 0)
	vs := verdicts(t, r)
	for _, name := range b.names {
		want := "unchanged"
		if name == "web4" || name == "web6" {
			want = "ok"
		}
		if v := vs[name]; v["ok"] != true || v["switch"].(map[string]any)["result"] != want || b.running(t, name) != v["toplevel"] {
			t.Errorf("%s: verdict %v (want switch %s), running %q", name, v, want, b.running(t, name))
		}
	}
	rolloutSummary(t, r, 6, 0, 0)
	msgs := strings.Join(logMsgs(r), "\n")
	if !strings.Contains(msgs, "rollout: canary of 2: web1, web2, web3, web4, web5") || !strings.Contains(msgs, "rollout: batch 1 of 2: web6") {
		t.Errorf("stages:\n%s", msgs)
	}
}

// Issue 14 item 2: a staged rollout of the ssh method on six test-bed nodes,
// canary=1,batch=2. A failed canary holds the five others, untouched; a failed
// second batch holds the third; a rerun after the fix completes, the nodes already
// deployed unchanged and not counted. One set of nodes for the whole story.
func TestSSHRollout(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	b := newRolloutBed(t, bed, "ssh")

	ok := t.Run("bad spec refused before any node", func(t *testing.T) {
		r := b.apply(t, "", "", "--rollout", "canary=1,wave=2")
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "--rollout: unknown key \"wave\"") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("refusal %q: want one line naming the flag", r.stderr)
		}
		r = b.apply(t, "", "batch=101%")
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, "the rollout setting: batch=101%") {
			t.Errorf("refusal %q: want one naming the setting", r.stderr)
		}
		// plan ignores the rollout. Offline: an online plan copies each changed
		// node's closure for its dry activation, and the stages below check that a
		// held node's closure was never copied.
		r = b.run(t, "plan", "", "batch=0", "--offline")
		wantCode(t, r, 0)
		for _, name := range b.names {
			b.untouched(t, name, "")
		}
	})
	ok = ok && t.Run("the canary fails: five nodes untouched", func(t *testing.T) { b.canaryFails(t, 1) })
	ok = ok && t.Run("batch 2 fails: batch 3 untouched", func(t *testing.T) {
		b.batch2Fails(t, "rollout: stopped at batch 2 (web4 failed): 1 nodes held")
	})
	if ok {
		t.Run("the rerun after the fix completes", b.rerunCompletes)
	}
}

// Issue 14 item 2 with the tf method: the same story as TestSSHRollout, the stages
// ordered inside the OpenTofu graph of one apply. A held node is never contacted
// (no probe: OpenTofu's state says what changes), its state records why it was
// held, and a plan after shows it; the rerun deploys it.
func TestTFRollout(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	b := newRolloutBed(t, bed, "tf")
	stateFile := filepath.Join(b.tree, ".switchyard", "tofu", "state", "switchyard.tfstate")
	// heldInState checks each node's held attribute in the state: want's, "" for
	// the others.
	heldInState := func(t *testing.T, want map[string]string) {
		t.Helper()
		raw, err := os.ReadFile(stateFile)
		if err != nil {
			t.Fatal(err)
		}
		deps, err := tofu.Deployments(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range b.names {
			if got, _ := deps[name]["held"].(string); got != want[name] {
				t.Errorf("%s: held in state %q, want %q", name, got, want[name])
			}
		}
	}

	ok := t.Run("the canary fails: five nodes untouched", func(t *testing.T) {
		b.canaryFails(t, 0)
		const reason = "held: the rollout stopped at the canary (web1 failed)"
		want := map[string]string{}
		for _, name := range b.names[1:] {
			want[name] = reason
		}
		heldInState(t, want)

		// A plan shows the held nodes, to be deployed. Offline: a plan that reads the
		// nodes dry-activates each changed one, copying its closure, and the next
		// subtest shows batch 3 untouched by its closure's absence.
		p := b.run(t, "plan", "web1", "canary=1,batch=2", "--offline")
		wantCode(t, p, 0)
		msgs := strings.Join(logMsgs(p), "\n")
		for _, name := range b.names[1:] {
			if want := name + ": " + reason + ", in the last apply: this plan deploys it"; !strings.Contains(msgs, want) {
				t.Errorf("plan logs lack %q:\n%s", want, msgs)
			}
		}
		for _, e := range p.events {
			if e["kind"] == "plan" && e["changed"] != true {
				t.Errorf("plan: %v, want every node changed", e)
			}
		}
	})
	ok = ok && t.Run("batch 2 fails: batch 3 untouched", func(t *testing.T) {
		b.batch2Fails(t, "rollout: batch 3 of 4: web6")
		heldInState(t, map[string]string{"web6": "held: the rollout stopped at batch 2 (web4 failed)"})
	})
	ok = ok && t.Run("the rerun after the fix completes", func(t *testing.T) {
		b.rerunCompletes(t)
		heldInState(t, nil)
	})
	if !ok {
		return
	}
	t.Run("without the rollout the nodes go back to one block, untouched", func(t *testing.T) {
		r := b.apply(t, "", "")
		wantCode(t, r, 0)
		for name, v := range verdicts(t, r) {
			if v["switch"].(map[string]any)["result"] != "unchanged" {
				t.Errorf("%s: %v, want unchanged", name, v)
			}
		}
		raw, _ := os.ReadFile(stateFile)
		if own, err := tofu.OwnBlocks(raw); err != nil || len(own) != 0 {
			t.Errorf("nodes still in blocks of their own: %v %v", own, err)
		}
	})
}

// launchNodes starts a test-bed node per name, all at once.
func launchNodes(t *testing.T, bed *testbed.Bed, names []string) map[string]*testbed.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	nodes := map[string]*testbed.Node{}
	errs := map[string]error{}
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := bed.Launch(ctx, t.Name()+"-"+name, t.TempDir())
			mu.Lock()
			defer mu.Unlock()
			if n != nil {
				t.Cleanup(n.Delete)
			}
			nodes[name], errs[name] = n, err
		}()
	}
	wg.Wait()
	for name, err := range errs {
		if err != nil {
			t.Fatalf("launch %s: %v", name, err)
		}
	}
	return nodes
}
