package settings

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/field"
)

// Type is the type of a setting. The zero Type accepts any data.
type Type struct {
	Kind       data.Kind       // "" for any data
	Enum       []string        // a string setting: the values allowed (none: any string)
	Minimum    *int64          // an integer setting: the smallest value allowed
	Items      *Type           // an array: the type of every element (nil: any)
	Properties map[string]Type // an object: its keys and their types (nil: any keys)
}

// Infer is the type a baked value gives its setting (see the package documentation).
func Infer(baked any) Type {
	switch k := data.KindOf(baked); k {
	case data.Null, "":
		return Type{}
	case data.Array:
		list := baked.([]any)
		t := Type{Kind: data.Array}
		if len(list) > 0 {
			first := data.KindOf(list[0])
			same := true
			for _, e := range list[1:] {
				if data.KindOf(e) != first {
					same = false
				}
			}
			if same {
				it := Infer(list[0])
				t.Items = &it
			}
		}
		return t
	case data.Object:
		obj := baked.(map[string]any)
		t := Type{Kind: data.Object}
		if len(obj) > 0 {
			t.Properties = make(map[string]Type, len(obj))
			for key, v := range obj {
				t.Properties[key] = Infer(v)
			}
		}
		return t
	default:
		return Type{Kind: k}
	}
}

// Check refuses a value that is not of type t, naming its path: "unknown setting" for a
// key the type does not know, "wrong type" otherwise.
func (t Type) Check(at field.Path, v any) error {
	got := data.KindOf(v)
	if got == "" {
		return field.Errorf(at, "not data: %T", v)
	}
	if t.Kind == "" {
		return nil
	}
	if got != t.Kind && !(t.Kind == data.Number && got == data.Integer) {
		return field.Errorf(at, "wrong type: %s, want %s", got.Article(), t.Kind.Article())
	}
	switch t.Kind {
	case data.String:
		if len(t.Enum) > 0 && !slices.Contains(t.Enum, v.(string)) {
			return field.Errorf(at, "wrong value %q: one of %s", v, quoteAll(t.Enum))
		}
	case data.Integer:
		if t.Minimum != nil {
			if i, _ := asInt(v); i < *t.Minimum {
				return field.Errorf(at, "wrong value %d: at least %d", i, *t.Minimum)
			}
		}
	case data.Array:
		if t.Items != nil {
			for i, e := range v.([]any) {
				if err := t.Items.Check(at.Index(i), e); err != nil {
					return err
				}
			}
		}
	case data.Object:
		if t.Properties != nil {
			obj := v.(map[string]any)
			for _, key := range slices.Sorted(maps.Keys(obj)) {
				pt, ok := t.Properties[key]
				if !ok {
					return field.Errorf(at.Key(key), "unknown setting")
				}
				if err := pt.Check(at.Key(key), obj[key]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Merge is submitted over baked, for a submitted value that passed Check: an object of
// known keys merges key by key (recursively); any other value replaces the baked one.
func (t Type) Merge(baked, submitted any) any {
	b, bok := baked.(map[string]any)
	s, sok := submitted.(map[string]any)
	if t.Kind != data.Object || t.Properties == nil || !bok || !sok {
		return submitted
	}
	out := make(map[string]any, len(b))
	for k, v := range b {
		out[k] = v
	}
	for k, v := range s {
		out[k] = t.Properties[k].Merge(b[k], v)
	}
	return out
}

// Schema is the JSON Schema of the type, with a description and a default.
func (t Type) Schema(description string, def any) map[string]any {
	s := map[string]any{"description": description, "default": SchemaValue(def)}
	switch t.Kind {
	case "":
		s["type"] = []any{"null", "boolean", "integer", "number", "string", "array", "object"}
	case data.Path:
		s["type"] = "object"
		s["properties"] = map[string]any{data.RepoPathKey: map[string]any{"type": "string", "description": "a path relative to the operator tree"}}
		s["required"] = []any{data.RepoPathKey}
		s["additionalProperties"] = false
	default:
		s["type"] = string(t.Kind)
	}
	if len(t.Enum) > 0 {
		enum := make([]any, len(t.Enum))
		for i, e := range t.Enum {
			enum[i] = e
		}
		s["enum"] = enum
	}
	if t.Minimum != nil {
		s["minimum"] = *t.Minimum
	}
	if t.Items != nil {
		var first any
		if list, ok := def.([]any); ok && len(list) > 0 {
			first = list[0]
		}
		s["items"] = t.Items.Schema(description+" (an element)", first)
	}
	if t.Properties != nil {
		props := map[string]any{}
		obj, _ := def.(map[string]any)
		for key, pt := range t.Properties {
			props[key] = pt.Schema(description+": "+key, obj[key])
		}
		s["properties"] = props
		s["additionalProperties"] = false
	}
	return s
}

// SchemaValue is a default as JSON Schema data (a RepoPath as its object).
func SchemaValue(v any) any {
	switch t := v.(type) {
	case data.RepoPath:
		return map[string]any{data.RepoPathKey: string(t)}
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = SchemaValue(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = SchemaValue(e)
		}
		return out
	}
	return v
}

func asInt(v any) (int64, bool) {
	switch t := v.(type) {
	case json.Number:
		i, err := t.Int64()
		return i, err == nil
	case int:
		return int64(t), true
	case int64:
		return t, true
	}
	return 0, false
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = `"` + s + `"`
	}
	return strings.Join(q, ", ")
}
