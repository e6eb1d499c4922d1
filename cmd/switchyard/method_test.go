package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// treeFor writes an operator tree whose nodes are the given test-bed nodes (host
// keys pinned) and returns it with the DEPLOYMENT for method that hands in the
// client key.
func treeFor(t *testing.T, method, closure string, nodes map[string]*testbed.Node) (string, string) {
	t.Helper()
	return treeWith(t, method, closure, nodes, nil)
}

// treeWith is treeFor with the tree's own deployment-method settings (anchors, which
// only the tree sets: SPEC 6.9).
func treeWith(t *testing.T, method, closure string, nodes map[string]*testbed.Node, baked map[string]any) (string, string) {
	t.Helper()
	spec := plantest.Tree{Closure: closure}
	if baked != nil {
		spec.Methods = map[string]map[string]any{method: baked}
	}
	var key string
	for name, n := range nodes {
		spec.Nodes = append(spec.Nodes, plantest.Node{Name: name, Host: "127.0.0.1", Port: n.SSHPort, HostKey: n.HostKey})
		key = n.KeyFile
	}
	dir := plantest.WriteTree(t, t.TempDir(), spec)
	return dir, fmt.Sprintf(`{"deployment-method":{%q:{"sshKeyFile":%q}}}`, method, key)
}

// logs lists the msg of every log event.
func logMsgs(r run) []string {
	var out []string
	for _, e := range r.events {
		if e["kind"] == "log" {
			out = append(out, fmt.Sprint(e["msg"]))
		}
	}
	return out
}

func countLogs(r run, node, substr string) int {
	n := 0
	for _, m := range logMsgs(r) {
		if strings.HasPrefix(m, node+": ") && strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

func verdicts(t *testing.T, r run) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, e := range r.events {
		if e["kind"] == "verdict" {
			out[e["node"].(string)] = e
		}
	}
	return out
}

// SPEC 9.12 and the ssh method: apply deploys every node; a second apply with nothing
// changed evaluates nothing (eval cache), builds nothing, copies nothing beyond the one
// query and switches nothing, and still judges each node.
func TestSSHApplyThenNothingChanged(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	nodes := map[string]*testbed.Node{"web1": bed.Node(t), "web2": bed.Node(t)}
	tree, deployment := treeFor(t, "ssh", "healthy", nodes)
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}

	r := switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	vs := verdicts(t, r)
	for name, n := range nodes {
		v := vs[name]
		if v == nil || v["ok"] != true || v["switch"].(map[string]any)["result"] != "ok" {
			t.Fatalf("%s: verdict %v", name, v)
		}
		if got := n.Readlink(t, "/run/current-system"); got != v["toplevel"] {
			t.Errorf("%s runs %q, want %v", name, got, v["toplevel"])
		}
		if countLogs(r, name, "build: evaluated") != 1 {
			t.Errorf("%s: first apply must evaluate once: %q", name, logMsgs(r))
		}
		receipts, _ := filepath.Glob(filepath.Join(tree, ".switchyard", "receipts", name, "*.json"))
		if len(receipts) != 1 {
			t.Errorf("%s: receipts %v, want one", name, receipts)
		} else if b, _ := os.ReadFile(receipts[0]); !strings.Contains(string(b), `"payloadType": "application/vnd.in-toto+json"`) {
			t.Errorf("%s: receipt %s", name, b)
		}
	}
	if strings.Contains(r.stdout+r.stderr, nodes["web1"].KeyFile) {
		t.Errorf("output names the ssh key file")
	}
	plan, _ := os.ReadFile(filepath.Join(tree, ".switchyard", "nodes", "web1", "plan.json"))
	if strings.Contains(string(plan), "id_ed25519") || !strings.Contains(string(plan), `"_repoPath"`) {
		t.Errorf("plan.json: %s", plan)
	}

	accepted := func(n *testbed.Node) int {
		return strings.Count(n.MustExec(t, "journalctl", "--unit", "ssh.service", "--output", "cat", "--no-pager"), "Accepted publickey")
	}
	before := map[string]int{"web1": accepted(nodes["web1"]), "web2": accepted(nodes["web2"])}
	r = switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	for name, n := range nodes {
		// One TCP connection per node for the whole deploy, every command a session on it.
		if got := accepted(n) - before[name]; got != 1 {
			t.Errorf("%s: the second apply opened %d SSH connections, want 1", name, got)
		}
	}
	vs = verdicts(t, r)
	for name := range nodes {
		v := vs[name]
		if v == nil || v["ok"] != true || v["switch"].(map[string]any)["result"] != "unchanged" {
			t.Errorf("%s: second apply verdict %v", name, v)
		}
		if countLogs(r, name, "build: evaluated") != 0 || countLogs(r, name, "build: eval cache hit") != 1 {
			t.Errorf("%s: second apply evaluated: %q", name, logMsgs(r))
		}
		if countLogs(r, name, "build: already built") != 1 {
			t.Errorf("%s: second apply built: %q", name, logMsgs(r))
		}
		if countLogs(r, name, "push: ") != 1 || countLogs(r, name, " 0 missing, 0 sent") != 1 {
			t.Errorf("%s: second apply copied more than the one query: %q", name, logMsgs(r))
		}
		for _, e := range r.events {
			if e["kind"] == "phase" && e["node"] == name && (e["phase"] == "switch" || e["phase"] == "finalize") && e["state"] != "skipped" {
				t.Errorf("%s: %s ran on an unchanged node", name, e["phase"])
			}
		}
	}
}

// SPEC 6.2/9.11: plan --out then apply --plan: each node evaluated once across both;
// an apply with another DEPLOYMENT is refused (exit 2) and changes nothing.
func TestSSHPlanThenApply(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "ssh", "healthy", map[string]*testbed.Node{"web1": node})
	cache := "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()
	saved := filepath.Join(t.TempDir(), "plan.json")

	r := switchyard(t, []string{"DEPLOYMENT=" + deployment, cache}, "ssh", "plan", "--tree", tree, "--out", saved, "--output", "json")
	wantCode(t, r, 0)
	var planned map[string]any
	for _, e := range r.events {
		if e["kind"] == "plan" {
			planned = e
		}
	}
	if planned == nil || planned["node"] != "web1" || planned["changed"] != true || len(fmt.Sprint(planned["nixos_conf"])) != 64 {
		t.Fatalf("plan event %v", planned)
	}

	other := strings.Replace(deployment, `"sshKeyFile"`, `"applications":{"hello":{"enable":true,"settings":{"greeting":"hey"}}},"sshKeyFile"`, 1)
	r = switchyard(t, []string{"DEPLOYMENT=" + other, cache}, "ssh", "apply", "--tree", tree, "--plan", saved, "--output", "json")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "DEPLOYMENT differs") {
		t.Errorf("refusal %q", r.stderr)
	}
	if got := node.Readlink(t, "/run/current-system"); got != "" {
		t.Errorf("the refused apply changed the node: %s", got)
	}

	r = switchyard(t, []string{"DEPLOYMENT=" + deployment, cache}, "ssh", "apply", "--tree", tree, "--plan", saved, "--output", "json")
	wantCode(t, r, 0)
	if n := countLogs(r, "web1", "build: evaluated"); n != 0 {
		t.Errorf("apply evaluated again after plan (%d): %q", n, logMsgs(r))
	}
}

// SPEC 9.8: an unreachable node is reported within DEPLOY_WAIT_TIMEOUT (exit 3) while
// the other nodes go on.
func TestSSHApplyOtherNodesGoOn(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	up := bed.Node(t)
	down := bed.Node(t)
	tree, deployment := treeFor(t, "ssh", "healthy", map[string]*testbed.Node{"web1": up, "web2": down})
	down.Delete() // gone: its forwarded port no longer answers
	r := switchyard(t, []string{"DEPLOYMENT=" + deployment, "DEPLOY_WAIT_TIMEOUT=3", "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()},
		"ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 3)
	vs := verdicts(t, r)
	if vs["web1"]["ok"] != true || vs["web2"]["reachable"] != false || vs["web2"]["exit_code"] != 3.0 {
		t.Errorf("verdicts %v", vs)
	}
	sum := r.events[len(r.events)-1]
	if sum["nodes"] != 2.0 || sum["ok"] != 1.0 || sum["failed"] != 1.0 || sum["exit_code"] != 3.0 {
		t.Errorf("summary %v", sum)
	}
}

// SPEC 6.4/9.11 and issue 11 item 8: the same tree copied to two directories and
// planned with the ssh key staged at two different paths gives the same plan.json
// bytes, configuration.nix and nixos_conf, and no output (stdout, stderr, the state
// dir's files, the saved plan) names a staging path; a bad submission is refused
// naming the JSON path, before anything changes.
func TestSSHPlanCredentialsAndRefusals(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	key, err := os.ReadFile(node.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	src := plantest.WriteTree(t, t.TempDir(), plantest.Tree{Nodes: []plantest.Node{{Name: "web1", Host: "127.0.0.1",
		Port: node.SSHPort, HostKey: node.HostKey}}})
	cache := "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()
	type planned struct{ planJSON, conf, nixosConf, drv string }
	stage := func(label string) planned {
		t.Helper()
		staging := filepath.Join(t.TempDir(), "staging-"+label)
		keyPath := filepath.Join(staging, "credentials", "ssh-key")
		if err := os.MkdirAll(filepath.Dir(keyPath), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyPath, key, 0o600); err != nil {
			t.Fatal(err)
		}
		tree := filepath.Join(t.TempDir(), "tree")
		if err := os.CopyFS(tree, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		saved := filepath.Join(t.TempDir(), "saved-plan.json")
		r := switchyard(t, []string{fmt.Sprintf(`DEPLOYMENT={"deployment-method":{"ssh":{"sshKeyFile":%q}}}`, keyPath), cache},
			"ssh", "plan", "--tree", tree, "--out", saved, "--output", "json")
		wantCode(t, r, 0)
		outputs := map[string]string{"stdout": r.stdout, "stderr": r.stderr}
		state := filepath.Join(tree, ".switchyard")
		err := filepath.WalkDir(state, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				b, rerr := os.ReadFile(path)
				outputs[path] = string(b)
				err = rerr
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		savedPlan, err := os.ReadFile(saved)
		if err != nil {
			t.Fatal(err)
		}
		outputs["the saved plan"] = string(savedPlan)
		for what, out := range outputs {
			if strings.Contains(out, staging) {
				t.Errorf("%s names the staging path %s:\n%s", what, staging, out)
			}
		}
		var p planned
		p.planJSON = outputs[filepath.Join(state, "nodes", "web1", "plan.json")]
		p.conf = outputs[filepath.Join(state, "nodes", "web1", "configuration.nix")]
		if p.planJSON == "" || p.conf == "" {
			t.Fatalf("%s: no plan.json or configuration.nix for web1 under %s", label, state)
		}
		var sp struct {
			Nodes map[string]struct {
				NixosConf string `json:"nixos_conf"`
				Drv       string `json:"drv"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(savedPlan, &sp); err != nil {
			t.Fatalf("saved plan: %v", err)
		}
		p.nixosConf, p.drv = sp.Nodes["web1"].NixosConf, sp.Nodes["web1"].Drv
		for _, e := range r.events {
			if e["kind"] == "plan" && e["node"] == "web1" && e["nixos_conf"] != p.nixosConf {
				t.Errorf("%s: plan event nixos_conf %v, saved plan %s", label, e["nixos_conf"], p.nixosConf)
			}
		}
		if len(p.nixosConf) != 64 || !strings.HasSuffix(p.drv, ".drv") {
			t.Fatalf("%s: saved plan %s", label, savedPlan)
		}
		return p
	}
	a, b := stage("a"), stage("b")
	if a.planJSON != b.planJSON {
		t.Errorf("plan.json differs across staging paths:\n%s\n%s", a.planJSON, b.planJSON)
	}
	if a.conf != b.conf {
		t.Errorf("configuration.nix differs across staging paths:\n%s\n%s", a.conf, b.conf)
	}
	if a.nixosConf != b.nixosConf || a.drv != b.drv {
		t.Errorf("nixos_conf or derivation differs across staging paths: %s %s vs %s %s", a.nixosConf, a.drv, b.nixosConf, b.drv)
	}

	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{Nodes: []plantest.Node{{Name: "web1", Host: "127.0.0.1", Port: 1,
		HostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4inzM5jOx8xxmjhITtKFD7q0B50Pu07HOHGjAEY+JB"}}})
	for _, tc := range []struct{ deployment, path string }{
		{`{"deployment-method":{"ssh":{"applications":{"wiki":{}}}}}`, "deployment-method.ssh.applications.wiki"},
		{`{"deployment-method":{"tf":{}}}`, "deployment-method.tf"},
		{`{"deployment-method":{"ssh":{},"tf":{}}}`, "deployment-method"},
		{`{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"greeting":7}}}}}}`, "deployment-method.ssh.applications.hello.settings.greeting"},
		{`{"deployment-method":{"ssh":{"colour":"blue"}}}`, "deployment-method.ssh.colour"},
		{`[]`, ""},
	} {
		r := switchyard(t, []string{"DEPLOYMENT=" + tc.deployment}, "ssh", "apply", "--tree", tree)
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, tc.path) {
			t.Errorf("DEPLOYMENT %s: exit %d stderr %q, want exit 2 naming %q", tc.deployment, r.code, r.stderr, tc.path)
		}
	}
}
