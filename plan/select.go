package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
)

// Selected is one picked node.
type Selected struct{ Group, Node string }

// Select picks the enabled nodes of a group (every group when group is empty), or the
// named subset of them, sorted by node name. An unknown group, an unknown node and a
// disabled node named explicitly are refusals (source --group / --node).
func Select(def *definition.Definition, group string, nodes []string) ([]Selected, error) {
	groups := sortedKeys(def.Groups)
	if group != "" {
		if _, ok := def.Groups[group]; !ok {
			return nil, &field.Error{Source: "--group", Reason: fmt.Sprintf("no group %q (groups: %s)", group, strings.Join(groups, ", "))}
		}
		groups = []string{group}
	}
	enabled := map[string]Selected{}
	disabled := map[string]bool{}
	for _, g := range groups {
		for name, n := range def.Groups[g].Nodes {
			if n.Enable {
				enabled[name] = Selected{Group: g, Node: name}
			} else {
				disabled[name] = true
			}
		}
	}
	var out []Selected
	if len(nodes) == 0 {
		for _, s := range enabled {
			out = append(out, s)
		}
	} else {
		seen := map[string]bool{}
		for _, name := range nodes {
			s, ok := enabled[name]
			switch {
			case disabled[name]:
				return nil, &field.Error{Source: "--node", Reason: fmt.Sprintf("node %s is disabled (enable = false)", name)}
			case !ok:
				return nil, &field.Error{Source: "--node", Reason: fmt.Sprintf("no node %q in %s", name, describe(group))}
			case !seen[name]:
				seen[name] = true
				out = append(out, s)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

func describe(group string) string {
	if group == "" {
		return "any group"
	}
	return "group " + group
}
