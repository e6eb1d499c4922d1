package plan

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/method"
)

func TestSchema(t *testing.T) {
	def := load(t, repo("plan", "testdata", "trees", "basic"))
	// A credential baked into the definition never shows in the schema.
	def.MethodSettings["tf-incus-operator"] = map[string]any{"dnsTsigKeyFile": "/secret/tsig.key", "project": "baked"}
	for _, m := range method.All() {
		s := Schema(def, m)
		b, err := data.Canonical(s)
		if err != nil {
			t.Fatalf("%s: schema is not data: %v", m.Name, err)
		}
		if strings.Contains(string(b), "/secret/") {
			t.Errorf("%s: a baked credential path in the schema", m.Name)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		branch := dig(t, doc, "properties", "deployment-method", "properties", m.Name)
		props := dig(t, branch, "properties")
		anchors := dig(t, doc, "$defs", "anchors", "properties")
		submittable := 0
		for _, st := range m.Settings {
			if st.Kind == method.Anchor {
				if _, ok := props[st.Name]; ok || dig(t, anchors, st.Name)["x-switchyard-anchor"] != true {
					t.Errorf("%s.%s: an anchor offered to a submission", m.Name, st.Name)
				}
				continue
			}
			submittable++
			leaf := dig(t, props, st.Name)
			if st.Credential() != (leaf["writeOnly"] == true) || st.Credential() != (leaf["x-switchyard-credential"] == true) {
				t.Errorf("%s.%s: credential marking %v", m.Name, st.Name, leaf)
			}
		}
		// domain, email, the submittable settings, two enables, hello's 5 settings and mail's 1.
		if n := leaves(t, m.Name, branch); n != 2+submittable+2+5+1 {
			t.Errorf("%s: %d leaves", m.Name, n)
		}
		coords := dig(t, doc, "$defs", "coordinates", "properties")
		for _, c := range m.Coordinates {
			if d := cmp.Diff(map[string]any{"type": "string", "description": c.Description, "default": c.Default}, coords[c.Name]); d != "" {
				t.Errorf("%s coordinate %s (-want +got)\n%s", m.Name, c.Name, d)
			}
		}
		if d := cmp.Diff(map[string]any{"web": []any{"web1", "web2"}}, doc["x-switchyard-nodes"]); d != "" {
			t.Errorf("%s roster (-want +got)\n%s (db runs no application; web3 is disabled)", m.Name, d)
		}
	}
	op, _ := method.Lookup("tf-incus-operator")
	s, _ := data.Canonical(Schema(def, op))
	if got := dig(t, mustJSON(t, s), "$defs", "anchors", "properties", "project")["default"]; got != "baked" {
		t.Errorf("the baked project is %v in the schema's anchors", got)
	}
	hello := dig(t, mustJSON(t, s), "properties", "deployment-method", "properties", "tf-incus-operator", "properties", "applications", "properties", "hello", "properties", "settings")
	want := map[string]any{"default": map[string]any{"_repoPath": "files/motd.txt"}, "description": "Application hello: setting motd.", "type": "object",
		"properties": map[string]any{"_repoPath": map[string]any{"type": "string", "description": "a path relative to the operator tree"}}, "required": []any{"_repoPath"}, "additionalProperties": false}
	if d := cmp.Diff(want, dig(t, hello, "properties", "motd")); d != "" {
		t.Errorf("a tree path setting (-want +got)\n%s", d)
	}
	if got := dig(t, hello, "properties", "port")["type"]; got != "integer" {
		t.Errorf("port type %v", got)
	}
	if got := dig(t, hello, "properties", "tls", "properties", "enable"); got["type"] != "boolean" || got["default"] != false {
		t.Errorf("nested setting %v", got)
	}
}

// leaves checks every leaf of a schema has a type, a description and a default, and
// returns how many it checked.
func leaves(t *testing.T, at string, s map[string]any) int {
	props, ok := s["properties"].(map[string]any)
	if _, treePath := props["_repoPath"]; !ok || treePath {
		for _, k := range []string{"type", "description", "default"} {
			if _, has := s[k]; !has {
				t.Errorf("leaf %s has no %s: %v", at, k, s)
			}
		}
		return 1
	}
	n := 0
	for name, p := range props {
		n += leaves(t, at+"."+name, p.(map[string]any))
	}
	return n
}

func dig(t *testing.T, m map[string]any, keys ...string) map[string]any {
	t.Helper()
	for _, k := range keys {
		next, ok := m[k].(map[string]any)
		if !ok {
			t.Fatalf("no object at %s in %v", k, m)
		}
		m = next
	}
	return m
}

func mustJSON(t *testing.T, b []byte) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
