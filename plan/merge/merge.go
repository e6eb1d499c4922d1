package merge

import (
	"maps"
	"slices"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/plan/settings"
)

// Source names the submission in refusals.
const Source = "DEPLOYMENT"

// Options is what the merge confines a submission with (SPEC 6.9), besides the tree.
type Options struct {
	// CredentialDirs is every directory a submitted credential file may lie under: the
	// tree's submissions.credentialDirs and the deployer's (credential.Dirs).
	CredentialDirs []string
	// Exclude is the tree's paths no node reads, since nixos_conf leaves them out: the
	// state dir and a saved plan (absolute; "" is ignored). A submitted tree path may
	// not lie under one, nor under a version-control directory (tree.Skipped).
	Exclude []string
}

// Merge merges DEPLOYMENT bytes into the definition for method m. Empty bytes are no
// submission: the baked deployment. A refusal is a *field.Error with Source
// "DEPLOYMENT" and the JSON path.
func Merge(def *definition.Definition, m method.Method, deployment []byte, opt Options) (*Deployment, error) {
	d := &Deployment{
		opt:          opt,
		Definition:   def,
		Method:       m,
		Domain:       def.Domain,
		Email:        def.Email,
		Applications: maps.Clone(def.Applications),
		Settings:     m.Defaults(),
		Hash:         Hash(deployment),
	}
	if d.Applications == nil {
		d.Applications = map[string]definition.Application{}
	}
	maps.Copy(d.Settings, def.MethodSettings[m.Name])
	if len(deployment) == 0 {
		return d, nil
	}
	if err := d.submit(deployment); err != nil {
		return nil, field.WithSource(err, Source)
	}
	return d, nil
}

func (d *Deployment) submit(b []byte) error {
	v, err := data.ParseData(b)
	if err != nil {
		return err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return field.Errorf("", "wrong type: %s, want an object with one deployment-method branch", data.KindOf(v).Article())
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "deployment-method" {
			return field.Errorf(field.Path("").Key(k), "unknown field (a DEPLOYMENT holds deployment-method only)")
		}
	}
	at := field.Path("").Key("deployment-method")
	dmv, ok := top["deployment-method"]
	if !ok {
		return field.Errorf("", "no deployment-method: want {\"deployment-method\":{\"%s\":{...}}}", d.Method.Name)
	}
	dm, ok := dmv.(map[string]any)
	if !ok {
		return field.Errorf(at, "wrong type: %s, want an object", data.KindOf(dmv).Article())
	}
	switch branches := slices.Sorted(maps.Keys(dm)); {
	case len(branches) == 0:
		return field.Errorf(at, "no branch: want exactly one, for method %s", d.Method.Name)
	case len(branches) > 1:
		return field.Errorf(at, "several branches (%s): want exactly one, for method %s", strings.Join(branches, ", "), d.Method.Name)
	case branches[0] != d.Method.Name:
		return field.Errorf(at.Key(branches[0]), "a branch for method %s, but the method being run is %s", branches[0], d.Method.Name)
	}
	at = at.Key(d.Method.Name)
	branch, ok := dm[d.Method.Name].(map[string]any)
	if !ok {
		return field.Errorf(at, "wrong type: %s, want an object", data.KindOf(dm[d.Method.Name]).Article())
	}
	for _, key := range slices.Sorted(maps.Keys(branch)) {
		v, kat := branch[key], at.Key(key)
		switch key {
		case "domain", "email":
			s, ok := v.(string)
			if !ok {
				return field.Errorf(kat, "wrong type: %s, want a string", data.KindOf(v).Article())
			}
			if key == "domain" {
				d.Domain, d.DomainSubmitted = s, true
			} else {
				d.Email = s
			}
		case "applications":
			if err := d.submitApplications(v, kat); err != nil {
				return err
			}
		default:
			if err := d.Method.Check(kat, key, v); err != nil {
				return err
			}
			if err := d.confineSetting(kat, key, v); err != nil {
				return err
			}
			d.Settings[key] = v
		}
	}
	return nil
}

func (d *Deployment) submitApplications(v any, at field.Path) error {
	apps, ok := v.(map[string]any)
	if !ok {
		return field.Errorf(at, "wrong type: %s, want an object", data.KindOf(v).Article())
	}
	for _, name := range slices.Sorted(maps.Keys(apps)) {
		aat := at.Key(name)
		baked, ok := d.Definition.Applications[name]
		if !ok {
			return field.Errorf(aat, "unknown application (one of %s)", strings.Join(slices.Sorted(maps.Keys(d.Definition.Applications)), ", "))
		}
		entry, ok := apps[name].(map[string]any)
		if !ok {
			return field.Errorf(aat, "wrong type: %s, want an object", data.KindOf(apps[name]).Article())
		}
		merged := definition.Application{Module: baked.Module, Settings: maps.Clone(baked.Settings), Units: baked.Units}
		for _, key := range slices.Sorted(maps.Keys(entry)) {
			switch key {
			case "enable":
				b, ok := entry[key].(bool)
				if !ok {
					return field.Errorf(aat.Key(key), "wrong type: %s, want a boolean", data.KindOf(entry[key]).Article())
				}
				merged.Enable = b
			case "settings":
				s, err := mergeSettings(baked.Settings, entry[key], aat.Key(key))
				if err != nil {
					return err
				}
				if err := d.confinePaths(baked.Settings, entry[key], aat.Key(key)); err != nil {
					return err
				}
				merged.Settings = s
			default:
				return field.Errorf(aat.Key(key), "unknown field (an application takes enable and settings)")
			}
		}
		d.Applications[name] = merged
	}
	return nil
}

// mergeSettings merges submitted settings over baked ones, key by key: the baked keys
// and their types are the schema (package settings).
func mergeSettings(baked map[string]any, v any, at field.Path) (map[string]any, error) {
	submitted, ok := v.(map[string]any)
	if !ok {
		return nil, field.Errorf(at, "wrong type: %s, want an object", data.KindOf(v).Article())
	}
	out := maps.Clone(baked)
	if out == nil {
		out = map[string]any{}
	}
	for _, key := range slices.Sorted(maps.Keys(submitted)) {
		b, known := baked[key]
		if !known {
			if len(baked) == 0 {
				return nil, field.Errorf(at.Key(key), "unknown setting (the application has no settings)")
			}
			return nil, field.Errorf(at.Key(key), "unknown setting (the baked settings are: %s)", strings.Join(slices.Sorted(maps.Keys(baked)), ", "))
		}
		t := settings.Infer(b)
		if err := t.Check(at.Key(key), submitted[key]); err != nil {
			return nil, err
		}
		out[key] = t.Merge(b, submitted[key])
	}
	return out, nil
}
