package tofu

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/rollout"
)

// configOf decodes a generated main.tf.json.
func configOf(t *testing.T, nodes []Node, subset bool, l Layout) map[string]any {
	t.Helper()
	raw, err := LayoutConfig(nodes, Backend{Kind: "local", Path: "/s/state"}, subset, nil, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func sshNodes(names ...string) []Node {
	var out []Node
	for _, n := range names {
		out = append(out, Node{Name: n, NixosConf: "conf-" + n, Drv: "/nix/store/x-" + n + ".drv", Host: "127.0.0.1"})
	}
	return out
}

// Issue 14 item 2: a staged rollout's graph. Every node in a block of its own
// (OpenTofu orders blocks, not the instances of one), each depending on the stage
// before it; the nodes moved from the shared block; the output over every block.
func TestStagedLayout(t *testing.T) {
	spec, err := rollout.Parse("canary=1,batch=2")
	if err != nil {
		t.Fatal(err)
	}
	stages := rollout.Stages([]string{"web1", "web2", "web3"}, map[string]bool{"web1": true, "web2": true, "web3": true}, spec)
	l := Staged(stages)
	if want := (contract.Step{Stage: "batch 1", After: []string{"web1"}, AfterStage: "the canary"}); !slices.Equal(l.Steps["web3"].After, want.After) ||
		l.Steps["web3"].Stage != want.Stage || l.Steps["web3"].AfterStage != want.AfterStage || len(l.Steps["web1"].After) != 0 {
		t.Fatalf("steps %+v", l.Steps)
	}
	cfg := configOf(t, sshNodes("web1", "web2", "web3"), false, l)
	blocks := cfg["resource"].(map[string]any)[ResourceType].(map[string]any)
	if _, shared := blocks[ResourceName]; shared || len(blocks) != 3 {
		t.Fatalf("blocks %v", blocks)
	}
	web1, web2 := blocks["node_web1"].(map[string]any), blocks["node_web2"].(map[string]any)
	if _, ok := web1["depends_on"]; ok || web1["for_each"] != nil {
		t.Errorf("the canary waits for nothing: %v", web1)
	}
	if d := web2["depends_on"].([]any); len(d) != 1 || d[0] != "switchyard_deployment.node_web1" {
		t.Errorf("batch 1 depends on %v", web2["depends_on"])
	}
	raw, _ := json.Marshal(web2)
	if strings.Contains(string(raw), "each.") || web2["node"] != `${"web2"}` || !strings.Contains(web2["drv"].(string), `local.nodes["web2"]`) {
		t.Errorf("web2's block still names each: %s", raw)
	}
	moved := cfg["moved"].([]any)
	if len(moved) != 3 || moved[1].(map[string]any)["from"] != Address("web2") || moved[1].(map[string]any)["to"] != OwnAddress("web2") {
		t.Errorf("moved %v", moved)
	}
	out := cfg["output"].(map[string]any)["deployments"].(map[string]any)["value"].(string)
	if !strings.HasPrefix(out, "${merge({}, {") || !strings.Contains(out, `"web3" = {toplevel = switchyard_deployment.node_web3.toplevel`) {
		t.Errorf("output %s", out)
	}
	if l.Address("web2") != "switchyard_deployment.node_web2" || NodeOf(l.Address("web2")) != "web2" {
		t.Errorf("address %s", l.Address("web2"))
	}
}

// A run without a rollout takes nodes of a past one back into the shared block; a
// subset run keeps each node where the state has it, moving nothing (OpenTofu
// refuses a move outside its targets).
func TestSharedAndSubsetLayout(t *testing.T) {
	cfg := configOf(t, sshNodes("web1", "web2"), false, Layout{})
	moved := cfg["moved"].([]any)
	if len(moved) != 2 || moved[0].(map[string]any)["from"] != OwnAddress("web1") || moved[0].(map[string]any)["to"] != Address("web1") {
		t.Errorf("moved back %v", moved)
	}
	cfg = configOf(t, sshNodes("web1", "web2"), true, Layout{Own: map[string]bool{"web2": true}})
	if _, ok := cfg["moved"]; ok {
		t.Errorf("a subset run moves: %v", cfg["moved"])
	}
	blocks := cfg["resource"].(map[string]any)[ResourceType].(map[string]any)
	shared := blocks[ResourceName].(map[string]any)
	if shared["for_each"] != `${{for k, v in local.nodes : k => v if !contains(["web2"], k)}}` || blocks["node_web2"] == nil {
		t.Errorf("blocks %v", blocks)
	}
	out := cfg["output"].(map[string]any)["deployments"].(map[string]any)["value"].(string)
	if !strings.HasPrefix(out, "${merge({for k, d in switchyard_deployment.node : ") {
		t.Errorf("output %s", out)
	}
	if _, err := LayoutConfig(sshNodes("web1"), Backend{}, false, &Tenant{}, Layout{Own: map[string]bool{"web1": true}}, nil); err == nil {
		t.Error("a tenant's rollout laid out")
	}
}

// The state's deployments, in the shared block or blocks of their own.
func TestOwnBlocksRead(t *testing.T) {
	state := []byte(`{"version":4,"resources":[
	 {"mode":"managed","type":"switchyard_deployment","name":"node","instances":[{"index_key":"web1","attributes":{"ok":true}}]},
	 {"mode":"managed","type":"switchyard_deployment","name":"node_web2","instances":[{"attributes":{"ok":false,"held":"held: x"}}]},
	 {"mode":"managed","type":"switchyard_incus_instance","name":"node","instances":[{"index_key":"web2","attributes":{}}]}]}`)
	d, err := Deployments(state)
	if err != nil || len(d) != 2 || d["web1"]["ok"] != true || d["web2"]["held"] != "held: x" {
		t.Errorf("deployments %v %v", d, err)
	}
	own, err := OwnBlocks(state)
	if err != nil || len(own) != 1 || !own["web2"] {
		t.Errorf("own %v %v", own, err)
	}
}
