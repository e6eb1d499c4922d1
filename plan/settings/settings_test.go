package settings

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/field"
)

func n(s string) json.Number { return json.Number(s) }

func TestInferAndCheck(t *testing.T) {
	for _, tc := range []struct {
		name        string
		baked, v    any
		path, wrong string // "" when v is accepted
	}{
		{"string", "hi", "hey", "", ""},
		{"string gets integer", "hi", n("1"), "s", "wrong type: an integer, want a string"},
		{"integer", n("80"), n("443"), "", ""},
		{"integer gets float", n("80"), n("80.5"), "s", "wrong type: a number, want an integer"},
		{"number gets integer", n("0.5"), n("2"), "", ""},
		{"boolean gets string", false, "true", "s", "wrong type: a string, want a boolean"},
		{"null takes anything", nil, map[string]any{"x": []any{}}, "", ""},
		{"list of strings", []any{"a"}, []any{"b", "c"}, "", ""},
		{"list element", []any{"a"}, []any{"b", n("1")}, "s[1]", "wrong type: an integer, want a string"},
		{"mixed list takes any elements", []any{"a", n("1")}, []any{true}, "", ""},
		{"empty list takes any list", []any{}, []any{n("1"), "x"}, "", ""},
		{"list gets object", []any{}, map[string]any{}, "s", "wrong type: an object, want an array"},
		{"object keys", map[string]any{"a": "x", "b": n("1")}, map[string]any{"b": n("2")}, "", ""},
		{"object unknown key", map[string]any{"a": "x"}, map[string]any{"c": "y"}, "s.c", "unknown setting"},
		{"object nested type", map[string]any{"a": map[string]any{"b": true}}, map[string]any{"a": map[string]any{"b": "no"}}, "s.a.b", "wrong type"},
		{"empty object takes any keys", map[string]any{}, map[string]any{"k": []any{}}, "", ""},
		{"tree path", data.RepoPath("a"), data.RepoPath("b"), "", ""},
		{"tree path gets string", data.RepoPath("a"), "b", "s", "wrong type: a string, want a tree path"},
		{"object gets tree path", map[string]any{"a": "x"}, data.RepoPath("b"), "s", "wrong type: a tree path"},
		{"not data", "x", func() {}, "s", "not data"},
	} {
		err := Infer(tc.baked).Check("s", tc.v)
		if tc.wrong == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		fe, ok := err.(*field.Error)
		if !ok || string(fe.Path) != tc.path || !strings.Contains(fe.Reason, tc.wrong) {
			t.Errorf("%s: got %v, want %s: %s", tc.name, err, tc.path, tc.wrong)
		}
	}
}

func TestMerge(t *testing.T) {
	baked := map[string]any{"a": map[string]any{"x": n("1"), "y": "keep"}, "l": []any{"a", "b"}, "free": map[string]any{}}
	typ := Infer(baked)
	sub := map[string]any{"a": map[string]any{"x": n("2")}, "l": []any{"c"}, "free": map[string]any{"z": "w"}}
	if err := typ.Check("", sub); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": map[string]any{"x": n("2"), "y": "keep"}, "l": []any{"c"}, "free": map[string]any{"z": "w"}}
	if d := cmp.Diff(want, typ.Merge(baked, sub)); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if baked["a"].(map[string]any)["x"] != n("1") {
		t.Error("merge changed the baked value")
	}
}

func TestSchema(t *testing.T) {
	minimum := int64(1)
	got := Type{Kind: data.Integer, Minimum: &minimum}.Schema("nodes at once", int64(8))
	want := map[string]any{"type": "integer", "minimum": int64(1), "description": "nodes at once", "default": int64(8)}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	got = Infer([]any{"a"}).Schema("tags", []any{"a"})
	want = map[string]any{"type": "array", "description": "tags", "default": []any{"a"},
		"items": map[string]any{"type": "string", "description": "tags (an element)", "default": "a"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got := Infer(nil).Schema("any", nil)["type"]; len(got.([]any)) != 7 {
		t.Errorf("an untyped setting's type %v: want every JSON type", got)
	}
	enum := Type{Kind: data.String, Enum: []string{"local", "pg"}}.Schema("backend", "local")
	if d := cmp.Diff([]any{"local", "pg"}, enum["enum"]); d != "" {
		t.Errorf("enum (-want +got)\n%s", d)
	}
}
