package definition

import (
	"maps"
	"slices"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/field"
)

// object reads the fields of one JSON object, refusing unknown ones.
type object struct {
	at field.Path
	m  map[string]any
}

func asObject(v any, at field.Path) (object, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return object{}, field.Errorf(at, "wrong type: %s, want an object", data.KindOf(v).Article())
	}
	return object{at: at, m: m}, nil
}

// only refuses any key not in known (the first in sorted order).
func (o object) only(known ...string) error {
	for _, k := range slices.Sorted(maps.Keys(o.m)) {
		if !slices.Contains(known, k) {
			return field.Errorf(o.at.Key(k), "unknown field")
		}
	}
	return nil
}

func (o object) has(key string) bool { _, ok := o.m[key]; return ok }

func (o object) string(key, def string) (string, error) {
	v, ok := o.m[key]
	if !ok {
		return def, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", o.wrong(key, data.String)
	}
	return s, nil
}

func (o object) bool(key string, def bool) (bool, error) {
	v, ok := o.m[key]
	if !ok {
		return def, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, o.wrong(key, data.Boolean)
	}
	return b, nil
}

func (o object) integer(key string, def int64) (int64, error) {
	v, ok := o.m[key]
	if !ok {
		return def, nil
	}
	if data.KindOf(v) != data.Integer {
		return 0, o.wrong(key, data.Integer)
	}
	return intOf(v), nil
}

func (o object) strings(key string, def []string) ([]string, error) {
	v, ok := o.m[key]
	if !ok {
		return def, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, o.wrong(key, data.Array)
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, field.Errorf(o.at.Key(key).Index(i), "wrong type: %s, want a string", data.KindOf(e).Article())
		}
		out[i] = s
	}
	return out, nil
}

// object is a member object; absent reads as an empty one.
func (o object) object(key string) (object, error) {
	v, ok := o.m[key]
	if !ok {
		return object{at: o.at.Key(key), m: map[string]any{}}, nil
	}
	return asObject(v, o.at.Key(key))
}

func (o object) wrong(key string, want data.Kind) error {
	return field.Errorf(o.at.Key(key), "wrong type: %s, want %s", data.KindOf(o.m[key]).Article(), want.Article())
}
