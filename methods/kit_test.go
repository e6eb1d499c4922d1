package methods

import (
	"fmt"

	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// testPlan is a merged deployment of method name and its planned nodes, over ssh or
// Incus as the method reaches them, without a tree.
func testPlan(name string, settings map[string]any, nodes ...string) (*merge.Deployment, *plan.Plan) {
	m, _ := method.Lookup(name)
	s := m.Defaults()
	for k, v := range settings {
		s[k] = v
	}
	d := &merge.Deployment{Method: m, Settings: s, Hash: merge.Hash([]byte(`{"x":1}`))}
	p := &plan.Plan{Deployment: d}
	for i, n := range nodes {
		pn := &plan.Node{Name: n, Group: "web", NixosConf: fmt.Sprintf("%064x", i+1)}
		pn.Plan.Coordinates = map[string]string{}
		if m.Transport == method.Incus {
			pn.Plan.Incus = &definition.Incus{Image: "img"}
		} else {
			pn.Plan.SSH = &definition.SSH{Host: "127.0.0.1", Port: int64(2200 + i), User: "root"}
		}
		p.Nodes = append(p.Nodes, pn)
	}
	return d, p
}
