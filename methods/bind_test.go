package methods

import (
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// TestCheckDomain: a submitted domain must be one of each run group's domains or a
// subdomain of one, label-wise; a group without domains keeps the tree's domain.
func TestCheckDomain(t *testing.T) {
	def := &definition.Definition{Domain: "test.example", Groups: map[string]definition.Group{
		"a": {Domains: []string{"a.example", "shop.example"}}, "b": {Domains: []string{"b.example"}}, "plain": {},
	}}
	m, _ := method.Lookup("tf-incus-operator")
	for _, tc := range []struct {
		domain    string
		submitted bool
		groups    []string
		refusal   string // "": allowed
	}{
		{"anything", false, []string{"a"}, ""},
		{"a.example", true, []string{"a"}, ""},
		{"eu.a.example", true, []string{"a"}, ""},
		{"A.Example.", true, []string{"a"}, ""},
		{"shop.example", true, []string{"a"}, ""},
		{"b.example", true, []string{"a"}, `"b.example" is not a domain of group a (groups.a.domains: a.example, shop.example)`},
		{"xa.example", true, []string{"a"}, "not a domain of group a"},
		{"example", true, []string{"a"}, "not a domain of group a"},
		{"a.example", true, []string{"a", "b"}, "not a domain of group b"},
		{"test.example", true, []string{"plain"}, ""},
		{"other.example", true, []string{"plain"}, "group plain lists no domains (groups.plain.domains), so a submission keeps the tree's domain"},
	} {
		d := &merge.Deployment{Definition: def, Method: m, Domain: tc.domain, DomainSubmitted: tc.submitted}
		err := checkDomain(def, d, tc.groups)
		switch {
		case tc.refusal == "" && err != nil:
			t.Errorf("%s for %v: %v", tc.domain, tc.groups, err)
		case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal) ||
			!strings.Contains(err.Error(), "deployment-method.tf-incus-operator.domain") || exitFor(err) != ExitRefused):
			t.Errorf("%s for %v: %v, want a refusal with %q", tc.domain, tc.groups, err, tc.refusal)
		}
	}
}
