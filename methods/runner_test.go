package methods

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/tofu"
	"github.com/switchyard-nix/switchyard/verdict"
)

// The runners' decisions, without the test bed (issue 13 item 1, the unit tier): no
// node, no Incus daemon, no OpenTofu.

func TestCheckSavedPlan(t *testing.T) {
	d, p := testPlan("ssh", nil, "web1", "web2")
	good := newSavedPlan(d, signed{})
	for _, n := range p.Nodes {
		good.Nodes[n.Name] = savedPlanNode{NixosConf: n.NixosConf}
	}
	dir := t.TempDir()
	save := func(name string, edit func(*savedPlan)) string {
		s := good
		s.Nodes = map[string]savedPlanNode{}
		for k, v := range good.Nodes {
			s.Nodes[k] = v
		}
		edit(&s)
		file := filepath.Join(dir, name)
		if err := s.write(file); err != nil {
			t.Fatal(err)
		}
		return file
	}
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not json"), 0o644)
	for _, tc := range []struct {
		name, file string
		refused    bool
	}{
		{"as planned", save("ok", func(*savedPlan) {}), false},
		{"another DEPLOYMENT", save("hash", func(s *savedPlan) { s.DeploymentHash = "00" }), true},
		{"another method", save("method", func(s *savedPlan) { s.Method = "tf" }), true},
		{"a node fewer", save("fewer", func(s *savedPlan) { delete(s.Nodes, "web2") }), true},
		{"another node", save("other", func(s *savedPlan) {
			s.Nodes["web3"] = s.Nodes["web2"]
			delete(s.Nodes, "web2")
		}), true},
		{"the tree changed", save("conf", func(s *savedPlan) { s.Nodes["web1"] = savedPlanNode{NixosConf: "ff"} }), true},
		{"no such file", filepath.Join(dir, "missing"), true},
		{"not a saved plan", garbage, true},
	} {
		err := checkSavedPlan(tc.file, d, p)
		if !tc.refused {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrRefused) || exitFor(err) != ExitRefused {
			t.Errorf("%s: got %v (exit %d), want a refusal", tc.name, err, exitFor(err))
		}
	}
}

func TestLockRefusal(t *testing.T) {
	other := errors.New("exit status 1")
	for _, tc := range []struct {
		name   string
		locked bool
		err    error
		want   bool
	}{
		{"no error", true, nil, false},
		{"another failure", false, other, false},
		{"lock seen in the -json stream", true, other, true},
		{"lock in the error", false, fmt.Errorf("Error: Error acquiring the state lock: held"), true},
	} {
		err := lockRefusal(tc.locked, tc.err)
		if got := errors.Is(err, ErrStateLocked); got != tc.want {
			t.Errorf("%s: got %v, want locked=%v", tc.name, err, tc.want)
		}
		if tc.want && (!errors.Is(err, ErrRefused) || exitFor(err) != ExitRefused) {
			t.Errorf("%s: %v is not a refusal", tc.name, err)
		}
	}
}

func TestSubsetAddresses(t *testing.T) {
	ssh := []tofu.Node{{Name: "web1"}}
	inc := []tofu.Node{{Name: "web1", Instance: &tofu.Instance{}}}
	tenant := &tofu.Tenant{DNS: &tofu.DNS{}, Spire: &tofu.Spire{}}
	for _, tc := range []struct {
		name   string
		nodes  []tofu.Node
		tenant *tofu.Tenant
		want   []string
	}{
		{"ssh node: its deployment", ssh, nil, []string{tofu.Address("web1")}},
		{"incus node: its instance too", inc, nil, []string{tofu.Address("web1"), tofu.InstanceAddress("web1")}},
		{"tenant node: what follows its deploy", inc, tenant,
			append([]string{tofu.Address("web1"), tofu.InstanceAddress("web1")}, tofu.TenantNodeAddresses("web1", tenant)...)},
	} {
		if got := subsetAddresses(tc.nodes, tc.tenant, tofu.Layout{}); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := tofu.TenantNodeAddresses("web1", tenant); len(got) < 3 {
		t.Errorf("tenant node addresses %v: want the pass, the agent and the records", got)
	}
}

func TestTofuNodes(t *testing.T) {
	_, p := testPlan("tf-incus", map[string]any{"project": "p1"}, "web1")
	f := &fleet{m: p.Deployment.Method, d: p.Deployment, s: p.Deployment.Typed(), p: p}
	nodes, err := f.tofuNodes(map[string]string{"web1": "/nix/store/x.drv"})
	if err != nil || len(nodes) != 1 || nodes[0].Instance.Project != "p1" || nodes[0].Drv != "/nix/store/x.drv" || nodes[0].Host != "" {
		t.Fatalf("tf-incus nodes %+v, %v", nodes, err)
	}
	// A tenant's instance is in its group's project when no project is set.
	_, p = testPlan("tf-incus-operator", nil, "web1")
	f = &fleet{m: p.Deployment.Method, d: p.Deployment, s: p.Deployment.Typed(), p: p}
	if nodes, err := f.tofuNodes(nil); err != nil || nodes[0].Instance.Project != "web" {
		t.Fatalf("tenant nodes %+v, %v", nodes, err)
	}
	// A node without its transport's settings is refused.
	_, p = testPlan("tf", map[string]any{"knownHostsFile": "/kh"}, "web1")
	f = &fleet{m: p.Deployment.Method, d: p.Deployment, s: p.Deployment.Typed(), p: p}
	if nodes, err := f.tofuNodes(nil); err != nil || nodes[0].Port != 2200 || nodes[0].KnownHostsFile != "/kh" {
		t.Fatalf("tf nodes %+v, %v", nodes, err)
	}
	p.Nodes[0].Plan.SSH = nil
	if _, err := f.tofuNodes(nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("a node without ssh settings: %v, want a refusal", err)
	}
}

// state is a pulled state (format 4) with a deployment per node of verdicts, and a
// verdict pass per node of passes.
func state(t *testing.T, verdicts map[string]verdict.Verdict, codes map[string]int, passes map[string]verdict.Verdict, stale ...string) []byte {
	t.Helper()
	recorded := map[string]string{}
	instances := func(vs map[string]verdict.Verdict, pass bool) []any {
		var out []any
		for node, v := range vs {
			b, _ := json.Marshal(v)
			attrs := map[string]any{"verdict": string(b), "exit_code": codes[node]}
			if !pass {
				recorded[node] = string(b)
			} else {
				// The pass follows the deploy recorded, or an earlier one (stale).
				followed := recorded[node]
				if slices.Contains(stale, node) {
					followed = "an earlier deploy's verdict"
				}
				sum := sha256.Sum256([]byte(followed))
				attrs["deployment"] = hex.EncodeToString(sum[:])
			}
			out = append(out, map[string]any{"index_key": node, "attributes": attrs})
		}
		return out
	}
	deployments := instances(verdicts, false)
	s := map[string]any{"version": 4, "resources": []any{
		map[string]any{"mode": "managed", "type": tofu.ResourceType, "name": tofu.ResourceName, "instances": deployments},
		map[string]any{"mode": "managed", "type": tofu.VerdictType, "name": tofu.ResourceName, "instances": instances(passes, true)},
	}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReadStates(t *testing.T) {
	deployed := verdict.Verdict{Node: "web1", Toplevel: "/nix/store/a", OK: true}
	passed := verdict.Verdict{Node: "web1", Toplevel: "/nix/store/a", OK: false, ExitCode: 1}
	raw := state(t, map[string]verdict.Verdict{"web1": deployed, "web2": {}}, map[string]int{"web1": 0, "web2": 3},
		map[string]verdict.Verdict{"web1": passed})

	got, err := readStates(raw, false)
	if err != nil {
		t.Fatal(err)
	}
	if st := got["web1"]; !st.verdict.OK || st.exitCode != 0 || st.recorded == "" {
		t.Errorf("web1 (deployment's verdict): %+v", st)
	}
	if st := got["web2"]; st.verdict.Node != "web2" || st.exitCode != 3 {
		t.Errorf("web2: %+v", st)
	}
	// A tenant's node: the verdict of the pass after registration.
	got, err = readStates(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	if st := got["web1"]; st.verdict.OK || st.verdict.ExitCode != 1 {
		t.Errorf("web1 (the pass's verdict): %+v", st)
	}
	// Issue 31 item 1: the deploy failed after the pass of an earlier one (OpenTofu
	// skipped the pass): the deployment's own verdict is the node's.
	failed := verdict.Verdict{Node: "web1", Toplevel: "/nix/store/b", ExitCode: 1}
	raw = state(t, map[string]verdict.Verdict{"web1": failed}, map[string]int{"web1": 1},
		map[string]verdict.Verdict{"web1": {Node: "web1", Toplevel: "/nix/store/a", OK: true}}, "web1")
	got, err = readStates(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	if st := got["web1"]; st.verdict.OK || st.verdict.Toplevel != "/nix/store/b" || st.exitCode != 1 {
		t.Errorf("web1 (a failed deploy after an earlier pass): %+v, want the deploy's failed verdict", st)
	}
	// Issue 34 item 2: --mode boot judged nothing. A deployment recorded "boot" keeps
	// its verdict over a pass that judged the old generation, and a pass that did not
	// judge (run under --mode boot) leaves the deployment's verdict the node's.
	boot := verdict.Verdict{Node: "web1", Toplevel: "/nix/store/b", OK: true, Switch: verdict.Switch{Result: verdict.SwitchBoot}}
	old := verdict.Verdict{Node: "web1", Toplevel: "/nix/store/a", ExitCode: 1}
	raw = state(t, map[string]verdict.Verdict{"web1": boot, "web2": deployed}, map[string]int{"web1": 0, "web2": 0},
		map[string]verdict.Verdict{"web1": old, "web2": {Node: "web2", OK: true, Switch: verdict.Switch{Result: verdict.SwitchBoot}}})
	got, err = readStates(raw, true)
	if err != nil {
		t.Fatal(err)
	}
	if st := got["web1"]; st.verdict.Switch.Result != verdict.SwitchBoot || st.verdict.Toplevel != "/nix/store/b" || st.exitCode != 0 {
		t.Errorf("web1 (deployed --mode boot, a pass after it): %+v, want the deploy's boot verdict", st)
	}
	if st := got["web2"]; st.verdict.Toplevel != "/nix/store/a" || !st.verdict.OK {
		t.Errorf("web2 (a pass that did not judge under --mode boot): %+v, want the deployment's verdict", st)
	}
	if _, err := readStates([]byte(`{"version": 3}`), false); err == nil {
		t.Error("a state of format 3 was read")
	}
	if got, err := readStates(nil, false); err != nil || len(got) != 0 {
		t.Errorf("an empty state: %v %v", got, err)
	}
}

func TestTallyApply(t *testing.T) {
	_, p := testPlan("tf", nil, "web1", "web2")
	ok := func(node string) nodeState {
		return nodeState{verdict: verdict.Verdict{Node: node, OK: true, Switch: verdict.Switch{Result: "ok"}}, recorded: node + "-v1"}
	}
	failedVerdict := nodeState{verdict: verdict.Verdict{Node: "web2"}, recorded: "web2-v2", exitCode: ExitVerdict}
	both := map[string]nodeState{"web1": ok("web1"), "web2": ok("web2")}
	for _, tc := range []struct {
		name              string
		before, after     map[string]nodeState
		applyErr, readErr error
		code              int
		summary           []int
		unchanged         []string
	}{
		{"both switched", nil, both, nil, nil, ExitOK, []int{2, 2, 0, 0}, nil},
		{"one left alone", map[string]nodeState{"web1": ok("web1")}, both, nil, nil, ExitOK, []int{2, 2, 0, 0}, []string{"web1"}},
		{"a failed verdict", nil, map[string]nodeState{"web1": ok("web1"), "web2": failedVerdict}, errors.New("exit status 1"), nil,
			ExitVerdict, []int{2, 1, 1, 1}, nil},
		{"a node missing from the state", nil, map[string]nodeState{"web1": ok("web1")}, nil, nil, ExitInfra, []int{2, 1, 1, 3}, nil},
		{"OpenTofu failed, verdicts fine", nil, both, errors.New("exit status 1"), nil, ExitInfra, []int{2, 2, 0, 3}, nil},
		{"the state unreadable", nil, both, nil, errors.New("state: bad"), ExitInfra, []int{2, 2, 0, 3}, nil},
	} {
		rep := &effectstest.Events{}
		code := tallyApply(rep, "tf", p.Nodes, tc.before, tc.after, tc.applyErr, tc.readErr)
		if code != tc.code || !slices.Equal(rep.Summarized(), tc.summary) {
			t.Errorf("%s: exit %d, summary %v; want %d, %v", tc.name, code, rep.Summarized(), tc.code, tc.summary)
		}
		var unchanged []string
		for _, v := range rep.Verdicts() {
			if v.Switch.Result == verdict.SwitchUnchanged {
				unchanged = append(unchanged, v.Node)
			}
		}
		if !slices.Equal(unchanged, tc.unchanged) {
			t.Errorf("%s: unchanged %v, want %v", tc.name, unchanged, tc.unchanged)
		}
	}
}

// sshFleet is the ssh runner over fake nodes: each node's transport is nodes[name]
// (a missing one is refused), evaluation and the outputs' query are local fakes.
func sshFleet(t *testing.T, nodes map[string]*effectstest.Node, names ...string) (*fleet, *effectstest.Events, *int) {
	d, p := testPlan("ssh", nil, names...)
	for _, n := range p.Nodes {
		n.Dir = t.TempDir()
	}
	rep := &effectstest.Events{}
	dialed := 0
	var mu sync.Mutex // the plan and the rollout's probe dial in parallel
	f := &fleet{m: d.Method, d: d, s: d.Typed(), p: p, out: rep, cfg: effects.Config{}}
	f.open = func(n *plan.Node) (effects.Transport, error) {
		mu.Lock()
		dialed++
		mu.Unlock()
		if tr, ok := nodes[n.Name]; ok {
			return tr, nil
		}
		return nil, fmt.Errorf("%s: host key mismatch: %w", n.Name, effects.ErrRefused)
	}
	f.evaluate = func(_ context.Context, n *plan.Node) (string, string, error) {
		if n.Name == "broken" {
			return "", "", errors.New("error: undefined variable")
		}
		return "/nix/store/" + n.Name + ".drv", "evaluated", nil
	}
	f.outputs = func(_ context.Context, drv string) (string, error) {
		return strings.TrimSuffix(drv, ".drv") + "-system\n", nil
	}
	f.build = func(_ context.Context, drv string) (string, error) {
		return strings.TrimSuffix(drv, ".drv") + "-system", nil
	}
	return f, rep, &dialed
}

func TestSSHPlan(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   map[string]*effectstest.Node
		names   []string
		offline bool
		code    int
		changed map[string]bool
		dialed  int
		summary []int // nodes, changed, failed, exit code
	}{
		{"one runs its toplevel, one does not",
			map[string]*effectstest.Node{"web1": {Current: "/nix/store/web1-system"}, "web2": {Current: "/nix/store/old-system"}},
			// web2, changed, is dialed again: its closure copied and dry-activated.
			[]string{"web1", "web2"}, false, ExitOK, map[string]bool{"web1": false, "web2": true}, 3, []int{2, 1, 0, ExitOK}},
		{"unreachable", map[string]*effectstest.Node{"web1": {Unreachable: true}},
			[]string{"web1"}, false, ExitInfra, map[string]bool{"web1": true}, 1, []int{1, 1, 1, ExitInfra}},
		{"transport refused", nil, []string{"web1"}, false, ExitRefused, map[string]bool{"web1": true}, 1, []int{1, 1, 1, ExitRefused}},
		{"evaluation failed", nil, []string{"broken"}, false, ExitInfra, map[string]bool{"broken": true}, 0, []int{1, 1, 1, ExitInfra}},
		{"offline: no node dialed, every node would be deployed", nil, []string{"web1", "web2"}, true, ExitOK,
			map[string]bool{"web1": true, "web2": true}, 0, []int{2, 2, 0, ExitOK}},
	} {
		f, rep, dialed := sshFleet(t, tc.nodes, tc.names...)
		f.offline = tc.offline
		out := filepath.Join(t.TempDir(), "plan.json")
		code, err := f.plan(context.Background(), out)
		if err != nil || code != tc.code {
			t.Errorf("%s: exit %d, %v; want %d", tc.name, code, err, tc.code)
		}
		if !slices.Equal(rep.Summarized(), tc.summary) {
			t.Errorf("%s: plan summary %v, want %v", tc.name, rep.Summarized(), tc.summary)
		}
		if fmt.Sprint(rep.Plans()) != fmt.Sprint(tc.changed) || *dialed != tc.dialed {
			t.Errorf("%s: plans %v, dialed %d; want %v, %d", tc.name, rep.Plans(), *dialed, tc.changed, tc.dialed)
		}
		var saved savedPlan
		if b, err := os.ReadFile(out); err != nil || json.Unmarshal(b, &saved) != nil || len(saved.Nodes) != len(tc.names) {
			t.Errorf("%s: saved plan %+v, %v", tc.name, saved, err)
		}
	}
}

func TestSSHDeployRefusedTransport(t *testing.T) {
	f, rep, dialed := sshFleet(t, nil, "web1", "web2")
	if code := f.deploy(context.Background(), false); code != ExitRefused {
		t.Errorf("exit %d, want %d", code, ExitRefused)
	}
	if !slices.Equal(rep.Summarized(), []int{2, 0, 2, ExitRefused}) || *dialed != 2 || len(rep.Verdicts()) != 0 {
		t.Errorf("summary %v, dialed %d, verdicts %v", rep.Summarized(), *dialed, rep.Verdicts())
	}
	if len(rep.Logs()) != 2 || !strings.HasPrefix(rep.Logs()[0], "error web1: wait: ") {
		t.Errorf("logs %q: want one error per node naming it and the phase", rep.Logs())
	}
}

func TestRunRefusesUnknownMethodOrVerb(t *testing.T) {
	for _, req := range []Request{{Method: "nope", Verb: "apply"}, {Method: "ssh", Verb: "destroy"}, {Method: "tf", Verb: "frob"}} {
		code, err := Run(context.Background(), req, &effectstest.Events{})
		if code != ExitRefused || !errors.Is(err, ErrRefused) {
			t.Errorf("%s %s: exit %d, %v", req.Method, req.Verb, code, err)
		}
	}
}
