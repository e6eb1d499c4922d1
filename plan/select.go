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

// Selection is which nodes a run is for: a group (every group when empty), names
// (--node, each an enabled node), and --on's terms (names, globs, @tags, ! to exclude;
// see parseTerm). With neither names nor terms that include, every enabled node of the
// group; exclusions then take nodes away.
type Selection struct {
	Group string
	Nodes []string // --node
	On    []string // --on, each a comma-separated list of terms
}

// Select picks the enabled nodes of sel, sorted by node name. An unknown group, a name
// that is no node, a disabled node named outright, a bad term and a selection that picks
// nothing are refusals (source --group, --node or --on). With tenantsOnly
// (method.Method.TenantsOnly) only groups that run an application are picked: another
// group named by --group, or holding a node named outright, is refused.
func Select(def *definition.Definition, sel Selection, tenantsOnly bool) ([]Selected, error) {
	terms, err := parseTerms(sel.On)
	if err != nil {
		return nil, &field.Error{Source: "--on", Reason: err.Error()}
	}
	groups, err := pickGroups(def, sel.Group, tenantsOnly)
	if err != nil {
		return nil, err
	}
	c := candidates(def, groups)
	named := namedOutright(sel.Nodes, terms)
	for _, n := range named {
		if err := c.check(def, n, sel.Group, tenantsOnly); err != nil {
			return nil, err
		}
	}
	picked := c.include(named, terms)
	for _, t := range terms {
		if t.exclude {
			for name := range picked {
				if t.match(name, c.tags[name]) {
					delete(picked, name)
				}
			}
		}
	}
	if len(picked) == 0 && (len(sel.Nodes) > 0 || len(terms) > 0) {
		source := "--on"
		if len(terms) == 0 {
			source = "--node"
		}
		return nil, &field.Error{Source: source, Reason: fmt.Sprintf("selects no node of %s", describe(sel.Group))}
	}
	out := slices.Collect(maps.Values(picked))
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out, nil
}

// pickGroups is the groups a run may pick nodes from.
func pickGroups(def *definition.Definition, group string, tenantsOnly bool) ([]string, error) {
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
	if !tenantsOnly {
		return groups, nil
	}
	var tenants []string
	for _, g := range groups {
		if def.Groups[g].RunsApplications() {
			tenants = append(tenants, g)
		}
	}
	return tenants, nil
}

// A name given outright, and the flag that gave it.
type namedNode struct{ name, source string }

// namedOutright is --node's names and --on's literal names that include.
func namedOutright(nodes []string, terms []term) []namedNode {
	var out []namedNode
	for _, n := range nodes {
		out = append(out, namedNode{n, "--node"})
	}
	for _, t := range terms {
		if !t.exclude && t.literal() {
			out = append(out, namedNode{t.glob, "--on"})
		}
	}
	return out
}

// nodePool is the nodes of the picked groups: the enabled ones with their tags, and the
// names of the disabled ones.
type nodePool struct {
	enabled  map[string]Selected
	tags     map[string][]string
	disabled map[string]bool
}

func candidates(def *definition.Definition, groups []string) nodePool {
	c := nodePool{enabled: map[string]Selected{}, tags: map[string][]string{}, disabled: map[string]bool{}}
	for _, g := range groups {
		for name, n := range def.Groups[g].Nodes {
			if n.Enable {
				c.enabled[name] = Selected{Group: g, Node: name}
				c.tags[name] = n.Tags
			} else {
				c.disabled[name] = true
			}
		}
	}
	return c
}

// check refuses a name given outright that is no enabled node of the picked groups.
func (c nodePool) check(def *definition.Definition, n namedNode, group string, tenantsOnly bool) error {
	if tenantsOnly {
		for gname, g := range def.Groups {
			if _, ok := g.Nodes[n.name]; ok && !g.RunsApplications() {
				return &field.Error{Source: n.source, Reason: fmt.Sprintf("node %s is in group %s, which runs no application: this method deploys only a tenant, a group that runs an application", n.name, gname)}
			}
		}
	}
	if c.disabled[n.name] {
		return &field.Error{Source: n.source, Reason: fmt.Sprintf("node %s is disabled (enable = false)", n.name)}
	}
	if _, ok := c.enabled[n.name]; !ok {
		return &field.Error{Source: n.source, Reason: fmt.Sprintf("no node %q in %s", n.name, describe(group))}
	}
	return nil
}

// include is the nodes named outright and those the including globs and tags match;
// every enabled node when nothing includes.
func (c nodePool) include(named []namedNode, terms []term) map[string]Selected {
	out := map[string]Selected{}
	including := len(named) > 0
	for _, n := range named {
		out[n.name] = c.enabled[n.name]
	}
	for _, t := range terms {
		if t.exclude || t.literal() {
			continue
		}
		including = true
		for name, s := range c.enabled {
			if t.match(name, c.tags[name]) {
				out[name] = s
			}
		}
	}
	if !including {
		maps.Copy(out, c.enabled)
	}
	return out
}

func describe(group string) string {
	if group == "" {
		return "any group"
	}
	return "group " + group
}
