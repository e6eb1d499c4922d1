package method

import (
	"github.com/switchyard-nix/switchyard/plan/coordinates"
	"github.com/switchyard-nix/switchyard/plan/field"
)

// Method is a deployment method.
type Method struct {
	Name        string
	Summary     string // one line for the usage texts (SPEC 1)
	Transport   string // SSH or Incus
	Settings    []Setting
	Coordinates []coordinates.Coordinate
	// TenantsOnly: the method deploys only a tenant's group, one that runs an
	// application; other groups are refused when picked and left out otherwise
	// (SPEC 7.1).
	TenantsOnly bool
	// Runner is what runs the method's verbs: RunnerSSH (the body on every node
	// over its transport) or RunnerTofu (an OpenTofu graph of switchyard's provider).
	Runner Runner
	// Verbs is the verbs of `switchyard <method>`, in the order of SPEC 2.
	Verbs []string
}

// Runner names the runner of a method's verbs.
type Runner int

const (
	RunnerSSH Runner = iota + 1
	RunnerTofu
)

// Verbs of the runners (SPEC 2).
var (
	sshVerbs  = []string{"apply", "plan", "verdict", "status", "exec", "names", "schema", "receipts"}
	tofuVerbs = []string{"apply", "plan", "destroy", "refresh", "run", "verdict", "status", "exec", "names", "schema", "receipts"}
)

// verbSummaries are the verbs' one-line descriptions for the usage texts (SPEC 2).
var verbSummaries = map[string]string{
	"apply":   "deploy the nodes (all, or --group/--node) and judge each one",
	"plan":    "compute the nodes' plans and say which would be deployed (nixos_conf)",
	"verdict": "judge the nodes as they run: the verdict-only pass (DEPLOY_VERDICT_ONLY=1 apply)",
	"exec": "run the argument vector after -- on the selected nodes in parallel, over the method's transport " +
		"(never through a shell switchyard builds); exit code the worst of the nodes'",
	"status": "per node, what the plan expects, what the node runs (its profile, boot entry and last receipt) and whether " +
		"it is ready (a fresh verdict-only pass, or --cached), each disagreement named; exit 1 when any node disagrees",
	"names":   "print the tree's groups and nodes as JSON",
	"schema":  "print what a DEPLOYMENT may set for this method, as JSON",
	"destroy": "destroy what the state holds (tf forgets the nodes and never touches them; the Incus methods delete their instances)",
	"refresh": "read the resources back into OpenTofu's state",
	"run":     "run OpenTofu with the arguments after -- in the method's working directory",
	"receipts": "show the nodes' receipts (show), or check their signatures and that each node runs the toplevel " +
		"its last receipt names (verify; exit 1 when not)",
}

// VerbSummary is verb's one-line description.
func VerbSummary(verb string) string { return verbSummaries[verb] }

// VerbDeploys says whether a verb runs the deploy body or its evaluation and so reads
// the DEPLOY_* variables (run: `run -- apply` deploys through the provider).
func VerbDeploys(verb string) bool {
	switch verb {
	case "apply", "plan", "verdict", "run":
		return true
	}
	return false
}

// Staged reports whether the method's apply deploys in stages (the rollout
// setting, the --rollout flag): the ssh method, tf and tf-incus.
func (m Method) Staged() bool {
	_, ok := m.Setting("rollout")
	return ok
}

// HasVerb reports whether verb is one of the method's verbs.
func (m Method) HasVerb(verb string) bool {
	for _, v := range m.Verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// Branch keys of a DEPLOYMENT branch that are not method settings: they move to the top
// level of the merged deployment (SPEC 6.2).
var Raised = []string{"applications", "domain", "email"}

// Lookup is the method of that name.
func Lookup(name string) (Method, bool) {
	for _, m := range registry {
		if m.Name == name {
			return m, true
		}
	}
	return Method{}, false
}

// All is every method, in the order of SPEC 1.
func All() []Method { return append([]Method(nil), registry...) }

// Names is every method's name, in the order of SPEC 1.
func Names() []string {
	out := make([]string, len(registry))
	for i, m := range registry {
		out[i] = m.Name
	}
	return out
}

// Setting is the method's setting of that name.
func (m Method) Setting(name string) (Setting, bool) {
	for _, s := range m.Settings {
		if s.Name == name {
			return s, true
		}
	}
	return Setting{}, false
}

// Check refuses a value for setting key at path at: an unknown setting, or a value of
// the wrong type.
func (m Method) Check(at field.Path, key string, v any) error {
	s, ok := m.Setting(key)
	if !ok {
		return field.Errorf(at, "unknown setting of method %s", m.Name)
	}
	return s.Type.Check(at, v)
}

// Defaults is every setting's default, by name.
func (m Method) Defaults() map[string]any {
	out := make(map[string]any, len(m.Settings))
	for _, s := range m.Settings {
		out[s.Name] = s.Default
	}
	return out
}

// Public is settings without the credentials: what may be saved, printed or planned.
func (m Method) Public(settings map[string]any) map[string]any {
	out := make(map[string]any, len(settings))
	for k, v := range settings {
		if s, ok := m.Setting(k); ok && s.Credential() {
			continue
		}
		out[k] = v
	}
	return out
}

// Credentials is the names of the method's credential settings.
func (m Method) Credentials() []string {
	var out []string
	for _, s := range m.Settings {
		if s.Credential() {
			out = append(out, s.Name)
		}
	}
	return out
}
