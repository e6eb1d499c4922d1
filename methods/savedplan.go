package methods

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/merge"
)

// savedPlan is `plan --out FILE`: what `apply --plan FILE` must deploy exactly.
type savedPlan struct {
	DeploymentHash string                   `json:"deployment_hash"`
	Method         string                   `json:"method"`
	Deployment     map[string]any           `json:"deployment"`
	Nodes          map[string]savedPlanNode `json:"nodes"`
	// Provenance is the submission the plan was made from (SPEC 6.8): its hash and
	// who signed it; never key material.
	Provenance provenance `json:"provenance"`
}

type provenance struct {
	SubmissionSHA256 string `json:"submission_sha256"`
	Signer           string `json:"signer,omitempty"` // the allowed_signers principal; none: unsigned
}

type savedPlanNode struct {
	NixosConf string `json:"nixos_conf"`
	Drv       string `json:"drv"`
	Toplevel  string `json:"toplevel"`
	Changed   bool   `json:"changed"`
}

func newSavedPlan(d *merge.Deployment, s signed) savedPlan {
	return savedPlan{DeploymentHash: d.Hash, Method: d.Method.Name, Deployment: d.Public(), Nodes: map[string]savedPlanNode{},
		Provenance: provenance{SubmissionSHA256: s.SubmissionSHA256, Signer: s.Principal}}
}

// write saves the plan to file (plan --out); "" saves nothing.
func (s savedPlan) write(file string) error {
	if file == "" {
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

// checkSavedPlan refuses an apply whose DEPLOYMENT or nodes differ from the saved plan.
func checkSavedPlan(file string, d *merge.Deployment, p *plan.Plan) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--plan: %v: %w", err, ErrRefused)
	}
	var saved savedPlan
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("--plan: not a saved plan: %v: %w", err, ErrRefused)
	}
	if saved.DeploymentHash != d.Hash {
		return fmt.Errorf("DEPLOYMENT differs from the planned one (deployment_hash %.12s, planned %.12s): the apply deploys only what was planned: %w",
			d.Hash, saved.DeploymentHash, ErrRefused)
	}
	if saved.Method != d.Method.Name {
		return fmt.Errorf("--plan: planned for method %s: %w", saved.Method, ErrRefused)
	}
	if len(saved.Nodes) != len(p.Nodes) {
		return fmt.Errorf("--plan: planned %d nodes, now %d: %w", len(saved.Nodes), len(p.Nodes), ErrRefused)
	}
	for _, n := range p.Nodes {
		sp, ok := saved.Nodes[n.Name]
		if !ok {
			return fmt.Errorf("%s: not in the plan: %w", n.Name, ErrRefused)
		}
		if sp.NixosConf != n.NixosConf {
			return fmt.Errorf("%s: nixos_conf differs from the plan (the tree changed since): %w", n.Name, ErrRefused)
		}
	}
	return nil
}
