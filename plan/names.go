package plan

import "github.com/switchyard-nix/switchyard/plan/merge"

// Published is publishedNames (SPEC 6.7): what a submission deploys.
type Published struct {
	Nodes                []string `json:"nodes"`                // the planned (enabled, picked) nodes, sorted
	DisabledApplications []string `json:"disabledApplications"` // applications that are off, sorted
}

// Names is the plan's publishedNames, from the same merged deployment its node
// configurations come from. Both lists are never null.
func (p *Plan) Names() Published {
	out := Published{Nodes: []string{}, DisabledApplications: p.Deployment.Disabled()}
	for _, n := range p.Nodes {
		out.Nodes = append(out.Nodes, n.Name)
	}
	return out
}

// Names is publishedNames of a merged deployment for a picked group (every group when
// empty) without computing the plans: the same nodes Compute would plan.
func Names(d *merge.Deployment, group string) (Published, error) {
	picked, err := Select(d.Definition, Selection{Group: group}, d.Method.TenantsOnly)
	if err != nil {
		return Published{}, err
	}
	out := Published{Nodes: []string{}, DisabledApplications: d.Disabled()}
	for _, s := range picked {
		out.Nodes = append(out.Nodes, s.Node)
	}
	return out, nil
}
