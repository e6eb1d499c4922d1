package plan

import (
	"path/filepath"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/tree"
)

// NodePlan is the content of a node's plan.json (SPEC 6.3): data only, no credential.
type NodePlan struct {
	Node   string
	Group  string
	Method string
	Domain string
	Email  string
	// Applications is the enabled applications of the node's group: name to settings.
	Applications map[string]map[string]any
	// Modules is the node's modules, then its enabled applications' modules (in the
	// group's order), each once.
	Modules []data.RepoPath
	// Coordinates is the value of every coordinate the method declares.
	Coordinates map[string]string
	// The node's settings for the method's transport: exactly one is set.
	SSH   *definition.SSH
	Incus *definition.Incus
	// NoSubstitute is the node's substituteOnNode = false: the copy streams every
	// path the node lacks. plan.json holds it only when set, so a tree that
	// leaves the default keeps its nixos_conf.
	NoSubstitute bool
}

// Node is one planned node.
type Node struct {
	Name  string
	Group string
	Plan  NodePlan

	PlanJSON      []byte      // plan.json: canonical
	Configuration []byte      // configuration.nix
	TreeFiles     []tree.File // every file of the tree (tree.Files), sorted by path; Content dropped once digested into NixosConf
	NixosConf     string      // SHA-256 hex: the node's configuration identity (SPEC 6.4)

	Dir   string // <state-dir>/nodes/<node>, absolute
	build Build
}

// PlanFile and ConfigurationFile are a node's files in its directory.
const (
	PlanFile          = "plan.json"
	ConfigurationFile = "configuration.nix"
)

// DefaultStateDir is the state dir of a tree when --state-dir is not given.
func DefaultStateDir(tree string) string { return filepath.Join(tree, ".switchyard") }

// NodeDir is the directory of a node's files under a state dir.
func NodeDir(stateDir, node string) string { return filepath.Join(stateDir, "nodes", node) }

// EvalArgv is the command that evaluates the node's toplevel derivation (it prints the
// .drv path), once the node's files are written (Plan.Write).
func (n *Node) EvalArgv() []string { return EvalArgv(n.build) }

// Build is the node's build inputs, as EvalArgv passes them to nix/build.nix.
func (n *Node) Build() Build { return n.build }
