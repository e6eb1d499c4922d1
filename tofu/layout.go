package tofu

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/rollout"
)

// Layout places each node's deployment in the configuration: in the shared for_each
// block, switchyard_deployment.node["<node>"] (the default), or in a block of its
// own, switchyard_deployment.node_<node>. A staged rollout needs blocks of their own:
// OpenTofu orders blocks by their dependencies, never the instances of one block.
// The zero Layout puts every node in the shared block.
type Layout struct {
	Own   map[string]bool          // nodes in a block of their own
	Steps map[string]contract.Step // a staged rollout: node to its place; these are in blocks of their own
}

// Staged is the layout of a staged rollout: every node of stages in a block of its
// own, each depending on the nodes of the stage before it.
func Staged(stages []rollout.Stage) Layout {
	l := Layout{Own: map[string]bool{}, Steps: map[string]contract.Step{}}
	for i, st := range stages {
		for _, n := range st.Nodes {
			step := contract.Step{Stage: st.String()}
			if i > 0 {
				step.After, step.AfterStage = stages[i-1].Nodes, stages[i-1].String()
			}
			l.Own[n], l.Steps[n] = true, step
		}
	}
	return l
}

// Address is the resource address of node's deployment in this layout.
func (l Layout) Address(node string) string {
	if l.own(node) {
		return OwnAddress(node)
	}
	return Address(node)
}

func (l Layout) own(node string) bool {
	_, staged := l.Steps[node]
	return l.Own[node] || staged
}

// OwnAddress is the address of node's deployment in a block of its own.
func OwnAddress(node string) string { return ResourceType + "." + ownName(node) }

// ownName is the name of node's own block; node names are identifiers already
// (letters, digits, "_" and "-"), but may start with a digit, which the prefix
// covers.
func ownName(node string) string { return ResourceName + "_" + node }

// place moves the nodes of the layout's own blocks out of the shared block of cfg's
// deployments (body, whose each.key and each.value are replaced by the node's), and
// points the deployments output at every block. A run over the whole tree (not
// subset) also gets a moved block per node from its other address, so a node goes
// between the shared block and its own without being deployed or forgotten; moving
// a node outside a -target'ed run is refused by OpenTofu, so a subset run must be
// laid out as the state holds its nodes.
func (l Layout) place(cfg *Config, nodes []Node, subset bool) {
	if cfg.Resource == nil || cfg.Resource.Deployment[ResourceName] == nil {
		return
	}
	blocks := cfg.Resource.Deployment
	body := blocks[ResourceName]
	var own, entries []string
	for _, n := range nodes {
		from, to := OwnAddress(n.Name), Address(n.Name)
		if l.own(n.Name) {
			from, to = to, from
			own = append(own, n.Name)
			blocks[ownName(n.Name)] = l.ownBlock(*body, n.Name)
			entries = append(entries, ownOutputEntry(n.Name))
		}
		if !subset {
			cfg.Moved = append(cfg.Moved, Moved{From: from, To: to})
		}
	}
	if len(own) == 0 {
		return
	}
	shared := "{for k, d in " + ResourceType + "." + ResourceName + " : k => {toplevel = d.toplevel, nixos_conf = d.nixos_conf, drv = d.drv, ok = d.ok}}"
	if len(own) == len(nodes) {
		delete(blocks, ResourceName)
		shared = "{}"
	} else {
		list, _ := json.Marshal(own)
		body.ForEach = "${{for k, v in local.nodes : k => v if !contains(" + string(list) + ", k)}}"
	}
	cfg.Output["deployments"] = deploymentsOutput("${merge(" + shared + ", {" + strings.Join(entries, ", ") + "})}")
}

// ownBlock is node's block of its own, made from the shared block body: after the
// nodes of the stage before it, if any.
func (l Layout) ownBlock(body DeploymentBlock, node string) *DeploymentBlock {
	blk := body.forNode(node)
	for _, a := range l.Steps[node].After {
		blk.DependsOn = append(blk.DependsOn, OwnAddress(a))
	}
	return blk
}

// ownOutputEntry is node's entry of the deployments output, from its own block.
func ownOutputEntry(node string) string {
	d := OwnAddress(node)
	return fmt.Sprintf("%s = {toplevel = %s.toplevel, nixos_conf = %s.nixos_conf, drv = %s.drv, ok = %s.ok}",
		strconv.Quote(node), d, d, d, d)
}

// forNodeExpr is the expression s of a for_each block's body for one node, quoted
// q: each.key is the node's name and each.value its entry of local.nodes.
func forNodeExpr(s, q string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "each.value", "local.nodes["+q+"]"), "each.key", q)
}
