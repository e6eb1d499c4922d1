package merge

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// submission is a random valid DEPLOYMENT branch for m over baked(), as data.
func submission(r *rand.Rand, m method.Method) map[string]any {
	branch := map[string]any{}
	if r.IntN(2) == 0 {
		branch["domain"] = "d" + strconv.Itoa(r.IntN(100)) + ".example"
	}
	if r.IntN(2) == 0 {
		branch["email"] = "x@e" + strconv.Itoa(r.IntN(100))
	}
	apps := map[string]any{}
	for name, a := range baked().Applications {
		if r.IntN(2) == 0 {
			continue
		}
		entry := map[string]any{}
		if r.IntN(3) > 0 {
			entry["enable"] = r.IntN(2) == 0
		}
		if r.IntN(2) == 0 {
			s := map[string]any{}
			for key, v := range a.Settings {
				if r.IntN(2) == 0 {
					if nv, ok := valueLike(r, v); ok {
						s[key] = nv
					}
				}
			}
			entry["settings"] = s
		}
		apps[name] = entry
	}
	if len(apps) > 0 || r.IntN(2) == 0 {
		branch["applications"] = apps
	}
	for _, s := range m.Settings {
		if r.IntN(3) > 0 || s.Kind == method.Anchor {
			continue
		}
		switch {
		case len(s.Type.Enum) > 0:
			branch[s.Name] = s.Type.Enum[r.IntN(len(s.Type.Enum))]
		case s.Type.Kind == data.Integer:
			branch[s.Name] = json.Number(strconv.Itoa(1 + r.IntN(50)))
		case s.Kind == method.Credential:
			branch[s.Name] = fixture.key
		default:
			branch[s.Name] = "s" + strconv.Itoa(r.IntN(1000))
		}
	}
	return map[string]any{"deployment-method": map[string]any{m.Name: branch}}
}

// valueLike is a random value of a scalar or list setting's type; false for the others
// (objects merge key by key, which the table tests cover).
func valueLike(r *rand.Rand, baked any) (any, bool) {
	switch data.KindOf(baked) {
	case data.String:
		return "s" + strconv.Itoa(r.IntN(1000)), true
	case data.Integer:
		return json.Number(strconv.Itoa(r.IntN(70000) - 100)), true
	case data.Number:
		return json.Number(strconv.Itoa(r.IntN(9)) + ".25"), true
	case data.Boolean:
		return r.IntN(2) == 0, true
	case data.Array:
		out := []any{}
		for i := r.IntN(3); i > 0; i-- {
			out = append(out, "t"+strconv.Itoa(i))
		}
		return out, true
	}
	return nil, false
}

// model is what the rules of SPEC 6.2 say the merge of a valid submission is.
func model(t *testing.T, m method.Method, sub map[string]any) *Deployment {
	w := deepCopy(want(t, m.Name, func(*Deployment) {}))
	branch := sub["deployment-method"].(map[string]any)[m.Name].(map[string]any)
	for key, v := range branch {
		switch key {
		case "domain":
			w.Domain, w.DomainSubmitted = v.(string), true
		case "email":
			w.Email = v.(string)
		case "applications":
			for name, e := range v.(map[string]any) {
				entry := e.(map[string]any)
				a := w.Applications[name]
				a.Enable, _ = entry["enable"].(bool)
				if s, ok := entry["settings"].(map[string]any); ok {
					for k, sv := range s {
						a.Settings[k] = sv
					}
				}
				w.Applications[name] = a
			}
		default:
			w.Settings[key] = v
		}
	}
	return w
}

func TestMergeProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 2))
	for i := 0; i < 400; i++ {
		m := method.All()[r.IntN(len(method.All()))]
		sub := submission(r, m)
		b, err := json.Marshal(sub)
		if err != nil {
			t.Fatal(err)
		}
		def := baked()
		got, err := Merge(def, m, b, opts())
		if err != nil {
			t.Fatalf("valid submission %s refused: %v", b, err)
		}
		if d := cmp.Diff(model(t, m, sub), got, cmpOpts...); d != "" {
			t.Fatalf("submission %s: (-model +merge)\n%s", b, d)
		}
		if d := cmp.Diff(baked(), def, cmpopts.IgnoreFields(definition.Definition{}, "Tree")); d != "" {
			t.Fatalf("merge changed the baked definition:\n%s", d)
		}
		if got.Hash != Hash(b) {
			t.Fatal("hash is not the SHA-256 of the bytes")
		}
		// The same submission in other bytes merges the same, with another hash.
		indented, _ := json.MarshalIndent(sub, "", "  ")
		again, err := Merge(baked(), m, indented, opts())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(got, again, cmpOpts...); d != "" {
			t.Fatalf("re-indented submission merges differently:\n%s", d)
		}
		if again.Hash == got.Hash {
			t.Fatal("different bytes, same deployment_hash")
		}
	}
}

// A fault injected anywhere in a valid submission is refused at exactly its path.
func TestMergeRefusalProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	for i := 0; i < 400; i++ {
		m := method.All()[r.IntN(len(method.All()))]
		sub := submission(r, m)
		branch := sub["deployment-method"].(map[string]any)[m.Name].(map[string]any)
		at := field.Path("").Key("deployment-method").Key(m.Name)
		var wantPath field.Path
		switch fault := r.IntN(6); fault {
		case 0: // an unknown method setting
			branch["bogus"] = "x"
			wantPath = at.Key("bogus")
		case 1: // a method setting of the wrong type
			s := m.Settings[r.IntN(len(m.Settings))]
			branch[s.Name] = []any{}
			wantPath = at.Key(s.Name)
		case 2: // an unknown application
			apps, _ := branch["applications"].(map[string]any)
			if apps == nil {
				apps = map[string]any{}
				branch["applications"] = apps
			}
			apps["zzz"] = map[string]any{}
			wantPath = at.Key("applications").Key("zzz")
		case 3, 4: // an unknown or mistyped setting of hello
			apps, _ := branch["applications"].(map[string]any)
			if apps == nil {
				apps = map[string]any{}
				branch["applications"] = apps
			}
			entry, _ := apps["hello"].(map[string]any)
			if entry == nil {
				entry = map[string]any{}
				apps["hello"] = entry
			}
			s, _ := entry["settings"].(map[string]any)
			if s == nil {
				s = map[string]any{}
				entry["settings"] = s
			}
			key := "unknown"
			if fault == 4 {
				key = "greeting"
				s[key] = json.Number("1")
			} else {
				s[key] = true
			}
			wantPath = at.Key("applications").Key("hello").Key("settings").Key(key)
		case 5: // a second branch
			other := method.All()[(r.IntN(3)+1+indexOf(m))%4].Name
			sub["deployment-method"].(map[string]any)[other] = map[string]any{}
			wantPath = field.Path("").Key("deployment-method")
		}
		b, _ := json.Marshal(sub)
		_, err := Merge(baked(), m, b, opts())
		p, ok := field.PathOf(err)
		if !ok || p != wantPath {
			t.Fatalf("%s: error %v, want a refusal at %s", b, err, wantPath)
		}
	}
}

func indexOf(m method.Method) int {
	for i, o := range method.All() {
		if o.Name == m.Name {
			return i
		}
	}
	panic(fmt.Sprint("no method ", m.Name))
}

// FuzzMerge: whatever the DEPLOYMENT bytes, Merge never panics, and what it accepts is
// data whose public form encodes canonically.
func FuzzMerge(f *testing.F) {
	for _, s := range []string{
		`{"deployment-method":{"ssh":{"applications":{"hello":{"enable":true,"settings":{"greeting":"hey"}},"mail":{}},"domain":"t.example"}}}`,
		`{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"tls":{"cert":{"_repoPath":"certs/web.pem"}},"extra":{"k":[1]}}}}}}}`,
		`{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"tls":{"cert":{"_repoPath":".git/config"}}}}}}}}`,
		`{"deployment-method":{"tf":{}}}`,
		`{"deployment-method":{"ssh":{"parallel":3,"sshKeyFile":"/k"}}}`,
		`[]`, ``,
	} {
		f.Add([]byte(s))
	}
	m, _ := method.Lookup("ssh")
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Merge(baked(), m, b, opts())
		if err != nil {
			if !field.IsRefusal(err) {
				t.Fatalf("error %v is not a refusal", err)
			}
			return
		}
		if _, err := data.Canonical(d.Public()); err != nil {
			t.Fatalf("merged deployment is not data: %v", err)
		}
	})
}
