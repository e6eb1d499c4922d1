package coordinates

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

var decls = []Coordinate{
	{Name: "HOSTING_ENV", Description: "where", Default: "production"},
	{Name: "DNS_DOMAIN", Description: "zone", Default: ""},
}

func TestFixed(t *testing.T) {
	r := Fixed(decls, map[string]string{"DNS_DOMAIN": "example.org", "UNDECLARED": "x"})
	want := map[string]string{"HOSTING_ENV": "production", "DNS_DOMAIN": "example.org"}
	if d := cmp.Diff(want, r.Values()); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got := Fixed(decls, map[string]string{"HOSTING_ENV": ""}).Lookup("HOSTING_ENV"); got != "production" {
		t.Errorf("an empty value reads the default, got %q", got)
	}
	if got := r.Declared(); got[0].Name != "DNS_DOMAIN" || len(got) != 2 {
		t.Errorf("Declared = %v", got)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("HOSTING_ENV", "staging")
	if got := Environment(decls).Lookup("HOSTING_ENV"); got != "staging" {
		t.Errorf("got %q", got)
	}
}

func TestUndeclaredPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("reading an undeclared coordinate did not panic")
		}
	}()
	Fixed(decls, nil).Lookup("HOME")
}

func TestDuplicatePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("declaring a coordinate twice did not panic")
		}
	}()
	Fixed(append(decls, decls[0]), nil)
}
