package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
)

// Selected is one picked node.
type Selected struct{ Group, Node string }

// Select picks the enabled nodes of a group (every group when group is empty), or the
// named subset of them, sorted by node name. An unknown group, an unknown node and a
// disabled node named explicitly are refusals (source --group / --node). With
// tenantsOnly (method.Method.TenantsOnly) only groups that run an application are
// picked: another group named by --group, or holding a node named by --node, is refused.
func Select(def *definition.Definition, group string, nodes []string, tenantsOnly bool) ([]Selected, error) {
	groups := slices.Sorted(maps.Keys(def.Groups))
	if group != "" {
		g, ok := def.Groups[group]
		if !ok {
			return nil, &field.Error{Source: "--group", Reason: fmt.Sprintf("no group %q (groups: %s)", group, strings.Join(groups, ", "))}
		}
		if tenantsOnly && !g.RunsApplications() {
			return nil, &field.Error{Source: "--group", Reason: fmt.Sprintf("group %s runs no application: this method deploys only a tenant, a group that runs an application", group)}
		}
		groups = []string{group}
	}
	if tenantsOnly {
		for _, name := range nodes {
			for gname, g := range def.Groups {
				if _, ok := g.Nodes[name]; ok && !g.RunsApplications() {
					return nil, &field.Error{Source: "--node", Reason: fmt.Sprintf("node %s is in group %s, which runs no application: this method deploys only a tenant, a group that runs an application", name, gname)}
				}
			}
		}
		var tenants []string
		for _, g := range groups {
			if def.Groups[g].RunsApplications() {
				tenants = append(tenants, g)
			}
		}
		groups = tenants
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
