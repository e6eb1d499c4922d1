package merge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// baked is a definition as Load returns it, over the fixture's tree.
func baked() *definition.Definition {
	return &definition.Definition{
		Tree:   fixture.tree,
		Domain: "example.org",
		Email:  "ops@example.org",
		Applications: map[string]definition.Application{
			"hello": {Enable: true, Module: "apps/hello.nix", Settings: map[string]any{
				"greeting": "hi",
				"port":     json.Number("8080"),
				"ratio":    json.Number("0.5"),
				"verbose":  false,
				"tags":     []any{"a", "b"},
				"tls":      map[string]any{"enable": false, "cert": data.RepoPath("certs/web.pem")},
				"banner":   data.RepoPath("a"),
				"extra":    map[string]any{},
				"anything": nil,
			}},
			"mail": {Enable: true, Module: "apps/mail.nix", Settings: map[string]any{}},
			"blog": {Enable: false, Module: "apps/blog.nix", Settings: map[string]any{"title": "notes"}},
		},
		MethodSettings: map[string]map[string]any{
			"tf-incus": {"project": "baked-project"},
			"ssh":      {"parallel": json.Number("2")},
		},
	}
}

func lookup(t testing.TB, name string) method.Method {
	t.Helper()
	m, ok := method.Lookup(name)
	if !ok {
		t.Fatalf("no method %s", name)
	}
	return m
}

// want is the merged deployment of the baked definition with no submission, for edits.
func want(t testing.TB, m string, edit func(d *Deployment)) *Deployment {
	d, err := Merge(baked(), lookup(t, m), nil, opts())
	if err != nil {
		t.Fatal(err)
	}
	edit(d)
	return d
}

var cmpOpts = []cmp.Option{cmpopts.IgnoreFields(Deployment{}, "Definition", "Hash"), cmpopts.IgnoreUnexported(Deployment{})}

func TestMergeRules(t *testing.T) {
	for _, tc := range []struct {
		name, method, in string
		edit             func(d *Deployment)
	}{
		{"no submission: the baked deployment with method defaults", "tf-incus", ``, func(d *Deployment) {}},
		{"applications, domain and email raised; method settings merged; deployment-method gone", "tf-incus",
			`{"deployment-method":{"tf-incus":{"domain":"tenant.example","email":"a@tenant.example","parallel":3}}}`,
			func(d *Deployment) {
				d.Domain, d.Email, d.DomainSubmitted = "tenant.example", "a@tenant.example", true
				d.Settings["parallel"] = json.Number("3")
			}},
		{"an application not named keeps its baked entry", "ssh",
			`{"deployment-method":{"ssh":{"applications":{"blog":{"enable":true}}}}}`,
			func(d *Deployment) {
				b := d.Applications["blog"]
				b.Enable = true
				d.Applications["blog"] = b
			}},
		{"an application named without enable is off", "ssh",
			`{"deployment-method":{"ssh":{"applications":{"hello":{},"mail":{"settings":{}}}}}}`,
			func(d *Deployment) {
				for _, n := range []string{"hello", "mail"} {
					a := d.Applications[n]
					a.Enable = false
					d.Applications[n] = a
				}
			}},
		{"settings override the baked ones key by key", "ssh",
			`{"deployment-method":{"ssh":{"applications":{"hello":{"enable":true,"settings":{"greeting":"hey","port":9090,"ratio":2,"tags":[],"tls":{"enable":true},"extra":{"any":[1,"x"]},"anything":{"x":1}}}}}}}`,
			func(d *Deployment) {
				s := d.Applications["hello"].Settings
				s["greeting"] = "hey"
				s["port"] = json.Number("9090")
				s["ratio"] = json.Number("2")
				s["tags"] = []any{}
				s["tls"] = map[string]any{"enable": true, "cert": data.RepoPath("certs/web.pem")}
				s["extra"] = map[string]any{"any": []any{json.Number("1"), "x"}}
				s["anything"] = map[string]any{"x": json.Number("1")}
			}},
		{"a tree path setting takes another tree path", "ssh",
			`{"deployment-method":{"ssh":{"applications":{"hello":{"enable":true,"settings":{"tls":{"cert":{"_repoPath":"./certs/other.pem"}}}}}}}}`,
			func(d *Deployment) {
				d.Applications["hello"].Settings["tls"] = map[string]any{"enable": false, "cert": data.RepoPath("certs/other.pem")}
			}},
		{"a credential staged in a credential directory", "ssh",
			`{"deployment-method":{"ssh":{"sshKeyFile":"` + fixture.key + `"}}}`,
			func(d *Deployment) { d.Settings["sshKeyFile"] = fixture.key }},
		{"a tree path deeper under the baked path's directory", "ssh",
			`{"deployment-method":{"ssh":{"applications":{"hello":{"enable":true,"settings":{"tls":{"cert":{"_repoPath":"certs/sub/deep.pem"}}}}}}}}`,
			func(d *Deployment) {
				d.Applications["hello"].Settings["tls"] = map[string]any{"enable": false, "cert": data.RepoPath("certs/sub/deep.pem")}
			}},
		{"the domain, marked as submitted", "ssh",
			`{"deployment-method":{"ssh":{"domain":"tenant.example"}}}`,
			func(d *Deployment) { d.Domain, d.DomainSubmitted = "tenant.example", true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Merge(baked(), lookup(t, tc.method), []byte(tc.in), opts())
			if err != nil {
				t.Fatal(err)
			}
			w := want(t, tc.method, func(*Deployment) {})
			// want() shares nothing with got, but its maps are the baked ones: copy before editing.
			w = deepCopy(w)
			tc.edit(w)
			if d := cmp.Diff(w, got, cmpOpts...); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
			if got.Hash != Hash([]byte(tc.in)) {
				t.Errorf("hash %s is not the SHA-256 of the DEPLOYMENT bytes", got.Hash)
			}
		})
	}
}

func TestMergeDefaultsAndBaked(t *testing.T) {
	d, err := Merge(baked(), lookup(t, "tf-incus"), nil, opts())
	if err != nil {
		t.Fatal(err)
	}
	if d.Settings["project"] != "baked-project" || d.Settings["stateBackend"] != "local" || d.Settings["parallel"] != int64(8) {
		t.Errorf("settings %v: want the baked project over the defaults", d.Settings)
	}
	if _, ok := d.Settings["parallel"].(json.Number); ok {
		t.Error("ssh's baked parallel leaked into tf-incus")
	}
}

func TestMergeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, method, in, path, reason string
	}{
		{"another method's branch", "tf-incus", `{"deployment-method":{"ssh":{}}}`, "deployment-method.ssh", "a branch for method ssh, but the method being run is tf-incus"},
		{"an unknown method's branch", "ssh", `{"deployment-method":{"nope":{}}}`, "deployment-method.nope", "a branch for method nope"},
		{"several branches", "ssh", `{"deployment-method":{"ssh":{},"tf":{}}}`, "deployment-method", "several branches (ssh, tf)"},
		{"no branch", "ssh", `{"deployment-method":{}}`, "deployment-method", "no branch"},
		{"no deployment-method", "ssh", `{}`, "", "no deployment-method"},
		{"a top-level field besides deployment-method", "ssh", `{"deployment-method":{"ssh":{}},"domain":"x"}`, "domain", "unknown field"},
		{"top level not an object", "ssh", `[1]`, "", "wrong type: an array"},
		{"deployment-method not an object", "ssh", `{"deployment-method":"ssh"}`, "deployment-method", "wrong type: a string, want an object"},
		{"branch not an object", "ssh", `{"deployment-method":{"ssh":[]}}`, "deployment-method.ssh", "wrong type: an array, want an object"},
		{"applications not an object", "ssh", `{"deployment-method":{"ssh":{"applications":["hello"]}}}`, "deployment-method.ssh.applications", "wrong type: an array"},
		{"application not an object", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":true}}}}`, "deployment-method.ssh.applications.hello", "wrong type: a boolean, want an object"},
		{"settings not an object", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":"x"}}}}}`, "deployment-method.ssh.applications.hello.settings", "wrong type: a string, want an object"},
		{"unknown application", "ssh", `{"deployment-method":{"ssh":{"applications":{"wiki":{"enable":true}}}}}`, "deployment-method.ssh.applications.wiki", "unknown application (one of blog, hello, mail)"},
		{"unknown application field", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"module":"x.nix"}}}}}`, "deployment-method.ssh.applications.hello.module", "unknown field"},
		{"unknown setting", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"colour":"red"}}}}}}`, "deployment-method.ssh.applications.hello.settings.colour", "unknown setting"},
		{"unknown setting of an application without settings", "ssh", `{"deployment-method":{"ssh":{"applications":{"mail":{"settings":{"x":1}}}}}}`, "deployment-method.ssh.applications.mail.settings.x", "unknown setting (the application has no settings)"},
		{"unknown nested setting", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"tls":{"key":"k"}}}}}}}`, "deployment-method.ssh.applications.hello.settings.tls.key", "unknown setting"},
		{"unknown method setting", "ssh", `{"deployment-method":{"ssh":{"project":"p"}}}`, "deployment-method.ssh.project", "unknown setting of method ssh"},
		{"wrong type: string for integer", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"port":"80"}}}}}}`, "deployment-method.ssh.applications.hello.settings.port", "wrong type: a string, want an integer"},
		{"wrong type: float for integer", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"port":80.5}}}}}}`, "deployment-method.ssh.applications.hello.settings.port", "wrong type: a number, want an integer"},
		{"wrong type: list element", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"tags":["a",1]}}}}}}`, "deployment-method.ssh.applications.hello.settings.tags[1]", "wrong type: an integer, want a string"},
		{"wrong type: string for tree path", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"tls":{"cert":"certs/x.pem"}}}}}}}`, "deployment-method.ssh.applications.hello.settings.tls.cert", "wrong type: a string, want a tree path"},
		{"wrong type: enable", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"enable":"yes"}}}}}`, "deployment-method.ssh.applications.hello.enable", "wrong type: a string, want a boolean"},
		{"wrong type: domain", "ssh", `{"deployment-method":{"ssh":{"domain":1}}}`, "deployment-method.ssh.domain", "wrong type: an integer, want a string"},
		{"wrong type: method setting", "tf", `{"deployment-method":{"tf":{"stateBackend":true}}}`, "deployment-method.tf.stateBackend", "wrong type: a boolean, want a string"},
		{"wrong value: enum", "tf", `{"deployment-method":{"tf":{"stateBackend":"s3"}}}`, "deployment-method.tf.stateBackend", `wrong value "s3"`},
		{"wrong type: method setting", "tf", `{"deployment-method":{"tf":{"parallel":"3"}}}`, "deployment-method.tf.parallel", "wrong type: a string, want an integer"},
		{"a tree path leaving the tree", "ssh", `{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"tls":{"cert":{"_repoPath":"../../etc/shadow"}}}}}}}}`, "deployment-method.ssh.applications.hello.settings.tls.cert", "leaves the tree"},
		{"not JSON", "ssh", `{"deployment-method":`, "deployment-method", "not JSON"},
		{"duplicate key", "ssh", `{"deployment-method":{"ssh":{"domain":"a","domain":"b"}}}`, "deployment-method.ssh.domain", "duplicate key"},
		{"two deployment-method keys", "ssh", `{"deployment-method":{"ssh":{}},"deployment-method":{"tf":{}}}`, "deployment-method", "duplicate key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Merge(baked(), lookup(t, tc.method), []byte(tc.in), opts())
			if err == nil {
				t.Fatalf("merged, want a refusal: %+v", d)
			}
			fe, ok := err.(*field.Error)
			if !ok {
				t.Fatalf("error %T %v, want a *field.Error", err, err)
			}
			if fe.Source != "DEPLOYMENT" || string(fe.Path) != tc.path || !strings.Contains(fe.Reason, tc.reason) {
				t.Errorf("got %q\nwant DEPLOYMENT: %s: ...%s...", fe.Error(), tc.path, tc.reason)
			}
		})
	}
}

func TestPublic(t *testing.T) {
	def := baked()
	def.MethodSettings["ssh"]["knownHostsFile"] = "/k"
	d, err := Merge(def, lookup(t, "ssh"), []byte(`{"deployment-method":{"ssh":{"sshKeyFile":"`+fixture.key+`"}}}`), opts())
	if err != nil {
		t.Fatal(err)
	}
	b, err := data.Canonical(d.Public())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), fixture.key) || strings.Contains(string(b), "sshKeyFile") {
		t.Errorf("a credential in the public deployment: %s", b)
	}
	if !strings.Contains(string(b), `"knownHostsFile":"/k"`) || !strings.Contains(string(b), d.Hash) {
		t.Errorf("public deployment %s lacks a setting or the hash", b)
	}
	if got := d.Disabled(); !cmp.Equal(got, []string{"blog"}) {
		t.Errorf("Disabled = %v", got)
	}
}

func TestSettingAccessors(t *testing.T) {
	d, err := Merge(baked(), lookup(t, "tf"), []byte(`{"deployment-method":{"tf":{"parallel":3,"sshKeyFile":"`+fixture.key+`"}}}`), opts())
	if err != nil {
		t.Fatal(err)
	}
	if s := d.Typed(); s.Parallel != 3 || s.SSHKeyFile != fixture.key || s.StateBackend != "local" || s.Project != "" {
		t.Errorf("typed settings: %+v", s)
	}
	d, _ = Merge(baked(), lookup(t, "tf"), nil, opts())
	if s := d.Typed(); s.Parallel != 8 {
		t.Errorf("default parallel %d", s.Parallel)
	}
}

func deepCopy(d *Deployment) *Deployment {
	c := *d
	c.Settings = copyValue(d.Settings).(map[string]any)
	c.Applications = map[string]definition.Application{}
	for k, a := range d.Applications {
		a.Settings = copyValue(a.Settings).(map[string]any)
		c.Applications[k] = a
	}
	return &c
}

func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = copyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = copyValue(e)
		}
		return out
	}
	return v
}
