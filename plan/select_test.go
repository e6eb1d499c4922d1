package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
)

// fleet is a definition of two groups: web (runs an application) and db (does not).
func fleet() *definition.Definition {
	n := func(tags ...string) definition.Node { return definition.Node{Enable: true, Tags: tags} }
	return &definition.Definition{Groups: map[string]definition.Group{
		"web": {Applications: []string{"hello"}, Nodes: map[string]definition.Node{
			"web1": n("edge"), "web2": n("edge", "canary"), "web3": {Enable: false, Tags: []string{"edge"}}, "api1": n(),
		}},
		"db": {Nodes: map[string]definition.Node{"db1": n("edge"), "db2": n()}},
	}}
}

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		name        string
		sel         Selection
		tenantsOnly bool
		want        []string
		refused     string // the refusal's source
	}{
		{name: "everything", want: []string{"api1", "db1", "db2", "web1", "web2"}},
		{name: "group", sel: Selection{Group: "db"}, want: []string{"db1", "db2"}},
		{name: "--node", sel: Selection{Nodes: []string{"web2", "db1"}}, want: []string{"db1", "web2"}},
		{name: "a name", sel: Selection{On: []string{"web1"}}, want: []string{"web1"}},
		{name: "a glob", sel: Selection{On: []string{"web*"}}, want: []string{"web1", "web2"}},
		{name: "a tag", sel: Selection{On: []string{"@edge"}}, want: []string{"db1", "web1", "web2"}},
		{name: "a tag in a group", sel: Selection{Group: "web", On: []string{"@edge"}}, want: []string{"web1", "web2"}},
		{name: "repeated and comma lists", sel: Selection{On: []string{"@canary,db*", "api1"}}, want: []string{"api1", "db1", "db2", "web2"}},
		{name: "exclusion only", sel: Selection{On: []string{"!db*"}}, want: []string{"api1", "web1", "web2"}},
		{name: "tag less a tag", sel: Selection{On: []string{"@edge", "!@canary"}}, want: []string{"db1", "web1"}},
		{name: "--node less --on", sel: Selection{Nodes: []string{"web1", "web2"}, On: []string{"!web2"}}, want: []string{"web1"}},
		{name: "--node and --on add up", sel: Selection{Nodes: []string{"api1"}, On: []string{"db2"}}, want: []string{"api1", "db2"}},
		{name: "tenants only", sel: Selection{On: []string{"@edge"}}, tenantsOnly: true, want: []string{"web1", "web2"}},

		{name: "a glob that selects nothing", sel: Selection{On: []string{"cache*"}}, refused: "--on"},
		{name: "everything excluded", sel: Selection{On: []string{"!*"}}, refused: "--on"},
		{name: "an unknown tag", sel: Selection{On: []string{"@nope"}}, refused: "--on"},
		{name: "an unknown name", sel: Selection{On: []string{"web9"}}, refused: "--on"},
		{name: "an unknown --node", sel: Selection{Nodes: []string{"web9"}}, refused: "--node"},
		{name: "a disabled name", sel: Selection{On: []string{"web3"}}, refused: "--on"},
		{name: "a disabled node by glob is not picked", sel: Selection{On: []string{"web3*"}}, refused: "--on"},
		{name: "a name of another group", sel: Selection{Group: "web", On: []string{"db1"}}, refused: "--on"},
		{name: "a bad glob", sel: Selection{On: []string{"web["}}, refused: "--on"},
		{name: "a bad tag", sel: Selection{On: []string{"@a b"}}, refused: "--on"},
		{name: "an empty term", sel: Selection{On: []string{"web1,"}}, refused: "--on"},
		{name: "a bare !", sel: Selection{On: []string{"!"}}, refused: "--on"},
		{name: "tenants only, a db node named", sel: Selection{On: []string{"db1"}}, tenantsOnly: true, refused: "--on"},
		{name: "an unknown group", sel: Selection{Group: "nope", On: []string{"web1"}}, refused: "--group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Select(fleet(), tc.sel, tc.tenantsOnly)
			if tc.refused != "" {
				fe, ok := err.(*field.Error)
				if !ok || fe.Source != tc.refused {
					t.Fatalf("got %v, %v; want a refusal of %s", got, err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.Node)
			}
			if d := cmp.Diff(tc.want, names); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}
