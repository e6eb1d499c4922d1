package plan

import (
	"maps"
	"slices"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
)

// Data is the plan as data: the content of plan.json.
func (p *NodePlan) Data() map[string]any {
	apps := make(map[string]any, len(p.Applications))
	for name, s := range p.Applications {
		apps[name] = s
	}
	modules := make([]any, len(p.Modules))
	for i, m := range p.Modules {
		modules[i] = m
	}
	out := map[string]any{
		"node":         p.Node,
		"group":        p.Group,
		"method":       p.Method,
		"domain":       p.Domain,
		"email":        p.Email,
		"applications": apps,
		"modules":      modules,
		"coordinates":  p.Coordinates,
	}
	if p.SSH != nil {
		out["ssh"] = p.SSH.Data()
	}
	if p.Incus != nil {
		out["incus"] = p.Incus.Data()
	}
	if p.NoSubstitute {
		out["substituteOnNode"] = false
	}
	return out
}

// JSON is plan.json: canonical JSON (sorted keys, no insignificant whitespace). A value
// that is not data is refused.
func (p *NodePlan) JSON() ([]byte, error) {
	b, err := data.Canonical(p.Data())
	if err != nil {
		return nil, &field.Error{Source: "plan of " + p.Node, Reason: err.Error()}
	}
	return b, nil
}

// ReadPlan reads a plan.json strictly: every field present and of its type, no other
// field, tree paths lexically inside the tree. Refusals name the field path, with source
// "plan.json".
func ReadPlan(b []byte) (*NodePlan, error) {
	p, err := readPlan(b)
	if err != nil {
		return nil, field.WithSource(err, PlanFile)
	}
	return p, nil
}

func readPlan(b []byte) (*NodePlan, error) {
	v, err := data.ParseData(b)
	if err != nil {
		return nil, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return nil, field.Errorf("", "wrong type: %s, want an object", data.KindOf(v).Article())
	}
	required := []string{"node", "group", "method", "domain", "email", "applications", "modules", "coordinates"}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if !contains(required, k) && k != "ssh" && k != "incus" && k != "substituteOnNode" {
			return nil, field.Errorf(field.Path("").Key(k), "unknown field")
		}
	}
	for _, k := range required {
		if _, ok := top[k]; !ok {
			return nil, field.Errorf(field.Path("").Key(k), "missing")
		}
	}
	p := &NodePlan{}
	for _, f := range []struct {
		key string
		dst *string
	}{{"node", &p.Node}, {"group", &p.Group}, {"method", &p.Method}, {"domain", &p.Domain}, {"email", &p.Email}} {
		s, ok := top[f.key].(string)
		if !ok {
			return nil, wrongType(field.Path("").Key(f.key), top[f.key], data.String)
		}
		*f.dst = s
	}
	at := field.Path("").Key("applications")
	apps, ok := top["applications"].(map[string]any)
	if !ok {
		return nil, wrongType(at, top["applications"], data.Object)
	}
	p.Applications = make(map[string]map[string]any, len(apps))
	for name, s := range apps {
		settings, ok := s.(map[string]any)
		if !ok {
			return nil, wrongType(at.Key(name), s, data.Object)
		}
		p.Applications[name] = settings
	}
	at = field.Path("").Key("modules")
	mods, ok := top["modules"].([]any)
	if !ok {
		return nil, wrongType(at, top["modules"], data.Array)
	}
	p.Modules = make([]data.RepoPath, len(mods))
	for i, m := range mods {
		rp, ok := m.(data.RepoPath)
		if !ok {
			return nil, wrongType(at.Index(i), m, data.Path)
		}
		p.Modules[i] = rp
	}
	at = field.Path("").Key("coordinates")
	coords, ok := top["coordinates"].(map[string]any)
	if !ok {
		return nil, wrongType(at, top["coordinates"], data.Object)
	}
	p.Coordinates = make(map[string]string, len(coords))
	for name, c := range coords {
		s, ok := c.(string)
		if !ok {
			return nil, wrongType(at.Key(name), c, data.String)
		}
		p.Coordinates[name] = s
	}
	if v, ok := top["substituteOnNode"]; ok {
		b, ok := v.(bool)
		if !ok {
			return nil, wrongType(field.Path("").Key("substituteOnNode"), v, data.Boolean)
		}
		p.NoSubstitute = !b
	}
	if v, ok := top["ssh"]; ok {
		if p.SSH, err = definition.DecodeSSH(v, field.Path("").Key("ssh")); err != nil {
			return nil, err
		}
	}
	if v, ok := top["incus"]; ok {
		if p.Incus, err = definition.DecodeIncus(v, field.Path("").Key("incus")); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func wrongType(at field.Path, v any, want data.Kind) error {
	return field.Errorf(at, "wrong type: %s, want %s", data.KindOf(v).Article(), want.Article())
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
