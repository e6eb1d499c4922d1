package methods

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/switchyard-nix/switchyard/plan"
)

// applied is the order submissions were applied to each group (SPEC 6.9): group ->
// the submissions' sha256, oldest first, each once (one applied again moves to the
// end). The last is the group's current submission; a signed submission found
// earlier has been superseded, and applying it again would roll the tenant back.
type applied map[string][]string

// superseded refuses a signed submission that an applied one superseded on one of
// groups; an unsigned one is the deployer's own and is not refused.
func (a applied) superseded(groups []string, s signed) error {
	if s.Principal == "" {
		return nil
	}
	for _, g := range groups {
		h := a[g]
		if i := slices.Index(h, s.SubmissionSHA256); i >= 0 && i < len(h)-1 {
			return fmt.Errorf("deployment signature: the submission (sha256 %s, signed by %s) was applied to group %s before and has since been superseded by %d other: "+
				"applying it again would roll the group back (--allow-older applies it anyway): %w", s.SubmissionSHA256, s.Principal, g, len(h)-1-i, ErrRefused)
		}
	}
	return nil
}

// apply makes the submission the current one of groups once it is not superseded
// there (or allowOlder), for the ssh state dir and OpenTofu's state alike.
func (a applied) apply(groups []string, s signed, allowOlder bool) error {
	if !allowOlder {
		if err := a.superseded(groups, s); err != nil {
			return err
		}
	}
	a.record(groups, s.SubmissionSHA256)
	return nil
}

// record makes the submission the current one of groups.
func (a applied) record(groups []string, sha string) {
	for _, g := range groups {
		a[g] = append(slices.DeleteFunc(slices.Clone(a[g]), func(s string) bool { return s == sha }), sha)
	}
}

// planGroups is the groups of a plan's nodes, sorted.
func planGroups(p *plan.Plan) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range p.Nodes {
		if !seen[n.Group] {
			seen[n.Group] = true
			out = append(out, n.Group)
		}
	}
	sort.Strings(out)
	return out
}

// appliedFile is where the ssh method keeps a group's applied submissions: the state
// dir's submissions/<group>.json.
func appliedFile(stateDir, group string) string {
	return filepath.Join(stateDir, "submissions", group+".json")
}

// readApplied reads the groups' records from the state dir; a group never applied
// has none.
func readApplied(stateDir string, groups []string) (applied, error) {
	a := applied{}
	for _, g := range groups {
		b, err := os.ReadFile(appliedFile(stateDir, g))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("the applied submissions of group %s: %w", g, err)
		}
		var rec struct{ Applied []string }
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("the applied submissions of group %s: %w", g, err)
		}
		a[g] = rec.Applied
	}
	return a, nil
}

// writeApplied writes the groups' records into the state dir, each atomically.
func writeApplied(stateDir string, groups []string, a applied) error {
	for _, g := range groups {
		b, err := json.MarshalIndent(struct {
			Applied []string `json:"applied"`
		}{a[g]}, "", "  ")
		if err != nil {
			return err
		}
		file := appliedFile(stateDir, g)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return err
		}
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, file); err != nil {
			return err
		}
	}
	return nil
}

// recordApplied makes the submission the current one of the groups in the state
// dir, once it is not superseded there (or allowOlder): before the deploy, so a
// submission whose deploy was cut short still supersedes the one before it.
func recordApplied(stateDir string, groups []string, s signed, allowOlder bool) error {
	a, err := readApplied(stateDir, groups)
	if err != nil {
		return err
	}
	if err := a.apply(groups, s, allowOlder); err != nil {
		return err
	}
	return writeApplied(stateDir, groups, a)
}

// checkScope refuses a signed submission for a group its signer is not scoped to
// (submissions.scopes, SPEC 6.9): without scopes every signer may submit for every
// group. A line of several principals is scoped to the groups of any of them.
func checkScope(scopes map[string][]string, s signed, groups []string) error {
	if scopes == nil || s.Principal == "" {
		return nil
	}
	principals := strings.Split(s.Principal, ",")
	for _, g := range groups {
		ok := slices.Contains(scopes[s.Principal], g)
		for _, p := range principals {
			ok = ok || slices.Contains(scopes[p], g)
		}
		if !ok {
			return fmt.Errorf("deployment signature: %s may not submit for group %s (submissions.scopes): %w", s.Principal, g, ErrRefused)
		}
	}
	return nil
}
