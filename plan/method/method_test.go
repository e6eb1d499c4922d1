package method

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/field"
)

func TestRegistry(t *testing.T) {
	if got, want := Names(), []string{"ssh", "tf", "tf-incus", "tf-incus-operator"}; !slices.Equal(got, want) {
		t.Fatalf("Names = %v, want %v", got, want)
	}
	creds := map[string][]string{
		"ssh":               {"sshKeyFile"},
		"tf":                {"sshKeyFile", "pgConnStringFile"},
		"tf-incus":          {"pgConnStringFile", "incusClientKeyFile"},
		"tf-incus-operator": {"pgConnStringFile", "incusClientKeyFile", "dnsTsigKeyFile", "spireTokenFile"},
	}
	for _, m := range All() {
		if d := cmp.Diff(creds[m.Name], m.Credentials()); d != "" {
			t.Errorf("%s credentials (-want +got)\n%s", m.Name, d)
		}
		seen := map[string]bool{}
		for _, s := range m.Settings {
			if seen[s.Name] {
				t.Errorf("%s: setting %s declared twice", m.Name, s.Name)
			}
			seen[s.Name] = true
			if slices.Contains(Raised, s.Name) {
				t.Errorf("%s: setting %s clashes with a raised key", m.Name, s.Name)
			}
			if s.Description == "" || s.Type.Kind == "" {
				t.Errorf("%s.%s: needs a type and a description", m.Name, s.Name)
			}
			if err := s.Type.Check("", s.Default); err != nil {
				t.Errorf("%s.%s: default %v: %v", m.Name, s.Name, s.Default, err)
			}
			if _, err := data.Canonical(s.Default); err != nil {
				t.Errorf("%s.%s: default is not data: %v", m.Name, s.Name, err)
			}
		}
		if len(m.Coordinates) == 0 {
			t.Errorf("%s declares no coordinates", m.Name)
		}
		if m.Runner != RunnerSSH && m.Runner != RunnerTofu || len(m.Verbs) == 0 || !m.HasVerb("apply") {
			t.Errorf("%s: runner %d, verbs %v", m.Name, m.Runner, m.Verbs)
		}
		if m.Transport != SSH && m.Transport != Incus {
			t.Errorf("%s: transport %q", m.Name, m.Transport)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup of an unknown method succeeded")
	}
}

func TestCheck(t *testing.T) {
	m, _ := Lookup("tf")
	at := field.Path("").Key("x")
	for _, tc := range []struct {
		key    string
		v      any
		reason string
	}{
		{"parallel", json.Number("4"), ""},
		{"parallel", json.Number("0"), "wrong value 0: at least 1"},
		{"parallel", json.Number("2.5"), "wrong type: a number, want an integer"},
		{"parallel", "4", "wrong type: a string, want an integer"},
		{"stateBackend", "pg", ""},
		{"stateBackend", "s3", `wrong value "s3": one of "local", "pg"`},
		{"sshKeyFile", "/run/k", ""},
		{"project", "p", "unknown setting of method tf"},
	} {
		err := m.Check(at, tc.key, tc.v)
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s=%v: %v", tc.key, tc.v, err)
		case tc.reason != "" && (err == nil || err.(*field.Error).Reason != tc.reason || err.(*field.Error).Path != at):
			t.Errorf("%s=%v: got %v, want %q at x", tc.key, tc.v, err, tc.reason)
		}
	}
}

func TestPublic(t *testing.T) {
	m, _ := Lookup("tf-incus-operator")
	in := map[string]any{"project": "p", "dnsTsigKeyFile": "/tmp/a", "spireTokenFile": "/tmp/b", "pgConnStringFile": "/tmp/c", "incusClientKeyFile": "/tmp/d", "parallel": 3}
	if d := cmp.Diff(map[string]any{"project": "p", "parallel": 3}, m.Public(in)); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// Every method and verb has its one-line description, so no help line is blank.
func TestEveryMethodAndVerbDescribed(t *testing.T) {
	for _, m := range All() {
		if m.Summary == "" {
			t.Errorf("method %s has no summary", m.Name)
		}
		for _, v := range m.Verbs {
			if VerbSummary(v) == "" {
				t.Errorf("verb %s of %s has no summary", v, m.Name)
			}
		}
	}
}
