package plan

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/plan/settings"
)

// Schema is the JSON Schema (draft 2020-12) of a DEPLOYMENT for method m over the
// definition (SPEC 6.7): the method's branch with domain, email, every application
// (enable and its settings, typed by their baked values) and every method setting, each
// leaf with a type, a description and a default (the baked value; a credential's default
// is never the baked path). Credentials are marked "writeOnly" and
// "x-switchyard-credential". Anchors (SPEC 6.9), which only the tree sets, are not
// properties of the branch: a form never offers them. Besides the schema proper:
//
//   - $defs.anchors: the method's anchors, each with its type, description and the
//     tree's value as default, for reference;
//   - $defs.coordinates: the environment coordinates the method's plans read, each a
//     string with its description and default;
//   - x-switchyard-nodes: the node roster, group to its enabled nodes, for every group
//     that runs an application.
func Schema(def *definition.Definition, m method.Method) map[string]any {
	branch := map[string]any{
		"type":                 "object",
		"description":          fmt.Sprintf("The %s method's settings and the deployment's applications, domain and email.", m.Name),
		"additionalProperties": false,
		"properties":           branchProperties(def, m),
	}
	return map[string]any{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"title":                fmt.Sprintf("switchyard %s DEPLOYMENT", m.Name),
		"description":          fmt.Sprintf("A submission for `switchyard %s`: exactly one branch, for the method being run (SPEC 6.2).", m.Name),
		"type":                 "object",
		"required":             []any{"deployment-method"},
		"additionalProperties": false,
		"properties": map[string]any{
			"deployment-method": map[string]any{
				"type":                 "object",
				"description":          "Exactly one branch: the method being run.",
				"required":             []any{m.Name},
				"additionalProperties": false,
				"properties":           map[string]any{m.Name: branch},
			},
		},
		"$defs":              map[string]any{"coordinates": coordinatesSchema(m), "anchors": anchorsSchema(def, m)},
		"x-switchyard-nodes": roster(def),
	}
}

func branchProperties(def *definition.Definition, m method.Method) map[string]any {
	props := map[string]any{
		"domain": map[string]any{"type": "string", "default": def.Domain,
			"description": "The deployment's DNS domain (moves to the top level of the plan)."},
		"email": map[string]any{"type": "string", "default": def.Email,
			"description": "The operator's contact e-mail (moves to the top level of the plan)."},
		"applications": applicationsSchema(def),
	}
	baked := def.MethodSettings[m.Name]
	for _, s := range m.Settings {
		if s.Kind == method.Anchor {
			continue
		}
		dflt := s.Default
		if v, ok := baked[s.Name]; ok && !s.Credential() {
			dflt = v
		}
		leaf := s.Type.Schema(s.Description, dflt)
		if s.Credential() {
			leaf["writeOnly"] = true
			leaf["x-switchyard-credential"] = true
			leaf["description"] = s.Description + " (a credential: a per-run path, never saved in a plan)"
		}
		props[s.Name] = leaf
	}
	return props
}

// anchorsSchema is the method's anchors as the tree sets them: not submittable.
func anchorsSchema(def *definition.Definition, m method.Method) map[string]any {
	props := map[string]any{}
	for _, s := range m.Settings {
		if s.Kind != method.Anchor {
			continue
		}
		dflt := s.Default
		if v, ok := def.MethodSettings[m.Name][s.Name]; ok {
			dflt = v
		}
		leaf := s.Type.Schema(s.Description+" (set by the tree only: deployment-method."+m.Name+"."+s.Name+")", dflt)
		leaf["x-switchyard-anchor"] = true
		props[s.Name] = leaf
	}
	return map[string]any{"type": "object", "description": "Settings only the tree sets (SPEC 6.9); a submission that sets one is refused.",
		"properties": props}
}

func applicationsSchema(def *definition.Definition) map[string]any {
	apps := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(def.Applications)) {
		a := def.Applications[name]
		state := "off"
		if a.Enable {
			state = "on"
		}
		settingsProps := map[string]any{}
		for _, key := range slices.Sorted(maps.Keys(a.Settings)) {
			v := a.Settings[key]
			settingsProps[key] = settings.Infer(v).Schema(fmt.Sprintf("Application %s: setting %s.", name, key), v)
		}
		apps[name] = map[string]any{
			"type":                 "object",
			"description":          fmt.Sprintf("Application %s (baked: %s). Named, it runs when enable is true; not named, it keeps its baked entry.", name, state),
			"additionalProperties": false,
			"properties": map[string]any{
				"enable": map[string]any{"type": "boolean", "default": false,
					"description": fmt.Sprintf("Whether application %s runs; a named application without enable is off.", name)},
				"settings": map[string]any{
					"type":                 "object",
					"description":          fmt.Sprintf("Application %s's settings: each key overrides the baked one.", name),
					"additionalProperties": false,
					"properties":           settingsProps,
					"default":              settings.SchemaValue(a.Settings),
				},
			},
		}
	}
	return map[string]any{
		"type":                 "object",
		"description":          "Applications, by name: only the defined ones.",
		"additionalProperties": false,
		"properties":           apps,
	}
}

func coordinatesSchema(m method.Method) map[string]any {
	props := map[string]any{}
	for _, c := range m.Coordinates {
		props[c.Name] = map[string]any{"type": "string", "description": c.Description, "default": c.Default}
	}
	return map[string]any{
		"type":        "object",
		"description": fmt.Sprintf("Environment coordinates the %s method's plans read (SPEC 6.5): environment variables, unset or empty reads the default.", m.Name),
		"properties":  props,
	}
}

// roster is the enabled nodes of every group that runs an application.
func roster(def *definition.Definition) map[string]any {
	out := map[string]any{}
	for _, g := range slices.Sorted(maps.Keys(def.Groups)) {
		group := def.Groups[g]
		if len(group.Applications) == 0 {
			continue
		}
		nodes := []any{}
		for _, n := range slices.Sorted(maps.Keys(group.Nodes)) {
			if group.Nodes[n].Enable {
				nodes = append(nodes, n)
			}
		}
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].(string) < nodes[j].(string) })
		out[g] = nodes
	}
	return out
}
