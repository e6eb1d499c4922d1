package plan

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/coordinates"
	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/plan/tree"
)

// Options picks what Compute plans, and where.
type Options struct {
	// StateDir is where the node files go (nodes/<node>/) and switchyard's Nix library
	// (nix/); the command's default is <tree>/.switchyard. Made absolute.
	StateDir string
	// Group is the picked group; empty: every group.
	Group string
	// Nodes is a subset of the picked group's enabled nodes (--node); empty: all of them.
	Nodes []string
	// On is --on's host selection (Selection.On).
	On []string
	// Exclude is switchyard's own files that may lie in the tree and are no input
	// (the saved plan of plan --out and apply --plan); "" is ignored.
	Exclude []string
}

// Plan is the plans of one run: the merged deployment and each picked node's plan.
type Plan struct {
	Deployment *merge.Deployment
	StateDir   string  // absolute
	TreeDigest string  // the tree's files' digest (TreeDigest), as nixos_conf covers it
	Nodes      []*Node // sorted by name
}

// Compute plans each enabled node of the picked group from the merged deployment: its
// plan.json, configuration.nix, tree files and nixos_conf. It reads the tree (for
// nixos_conf) and the environment only through coords, and writes nothing (Plan.Write
// does). An unknown group or node, a node without the settings its method's transport
// needs, or a tree path of a setting that is missing or leaves the tree is a refusal.
func Compute(d *merge.Deployment, coords *coordinates.Reader, opt Options) (*Plan, error) {
	if opt.StateDir == "" {
		return nil, fmt.Errorf("plan: no state dir")
	}
	stateDir, err := filepath.Abs(opt.StateDir)
	if err != nil {
		return nil, err
	}
	picked, err := Select(d.Definition, Selection{Group: opt.Group, Nodes: opt.Nodes, On: opt.On}, d.Method.TenantsOnly)
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	for _, c := range d.Method.Coordinates {
		values[c.Name] = coords.Lookup(c.Name)
	}
	in, err := readInputs(d.Definition, append([]string{stateDir}, opt.Exclude...))
	if err != nil {
		return nil, err
	}
	p := &Plan{Deployment: d, StateDir: stateDir, TreeDigest: in.treeDigest}
	for _, s := range picked {
		n, err := computeNode(d, s, values, stateDir, in)
		if err != nil {
			return nil, err
		}
		p.Nodes = append(p.Nodes, n)
	}
	return p, nil
}

// inputs is what every node of a run reads besides its own files: the tree and nixpkgs.
type inputs struct {
	files      []tree.File
	treeDigest string
	nixpkgs    string // NixpkgsInput
}

// readInputs reads the tree (but exclude: the state dir...) and nixpkgs' identity, once per run. A
// tree file that reads the environment is refused: the node's evaluation runs without
// the caller's environment (EvalEnv), so the read would silently see nothing.
func readInputs(def *definition.Definition, exclude []string) (inputs, error) {
	files, err := def.Tree.Files(exclude)
	if err != nil {
		return inputs{}, fmt.Errorf("reading the tree: %w", err)
	}
	nixpkgs, err := NixpkgsInput(def.Tree, def.Nixpkgs)
	if err != nil {
		return inputs{}, err
	}
	// nixpkgs in the tree reads the environment for impure use (~/.config/nixpkgs);
	// evaluated without it, it takes its defaults.
	vendored, inTree := strings.CutPrefix(nixpkgs, "tree ")
	for _, f := range files {
		// deployment.nix is evaluated with the environment, to data the plan holds.
		if f.Kind == "symlink" || f.Kind == "outside" || !strings.HasSuffix(f.Path, ".nix") || f.Path == definition.NixFile ||
			inTree && strings.HasPrefix(f.Path, vendored+"/") {
			continue
		}
		if reads := tree.EnvReads(f.Content); len(reads) > 0 {
			r := reads[0]
			what := "builtins.getEnv"
			if r.Name != "" {
				what += fmt.Sprintf(" %q", r.Name)
			}
			return inputs{}, &field.Error{Source: f.Path, Reason: fmt.Sprintf(
				"line %d: %s reads the environment, which a node's evaluation does not see: declare a coordinate of the method and read it from the plan (config.switchyard.plan.coordinates)", r.Line, what)}
		}
	}
	digest := TreeDigest(files)
	// The digest holds the content from here on: a tree can be large (a nixpkgs
	// checkout in it is hundreds of MiB), and a run keeps only paths and kinds.
	for i := range files {
		files[i].Content = nil
	}
	return inputs{files: files, treeDigest: digest, nixpkgs: nixpkgs}, nil
}

func computeNode(d *merge.Deployment, s Selected, coords map[string]string, stateDir string, in inputs) (*Node, error) {
	def := d.Definition
	group := def.Groups[s.Group]
	node := group.Nodes[s.Node]
	at := field.Path("").Key("groups").Key(s.Group).Key("nodes").Key(s.Node)

	np := NodePlan{
		Node: s.Node, Group: s.Group, Method: d.Method.Name,
		Domain: d.Domain, Email: d.Email,
		Applications: map[string]map[string]any{},
		Coordinates:  coords,
		NoSubstitute: !node.SubstituteOnNode,
	}
	switch d.Method.Transport {
	case method.SSH:
		if node.SSH == nil {
			return nil, &field.Error{Source: def.Source, Path: at.Key("ssh"), Reason: fmt.Sprintf("missing: method %s reaches nodes over ssh", d.Method.Name)}
		}
		np.SSH = node.SSH
	case method.Incus:
		if node.Incus == nil {
			return nil, &field.Error{Source: def.Source, Path: at.Key("incus"), Reason: fmt.Sprintf("missing: method %s makes an Incus instance of every node", d.Method.Name)}
		}
		np.Incus = node.Incus
	}
	roots := slices.Clone(node.Modules)
	var appModules []data.RepoPath
	for _, name := range group.Applications {
		app := d.Applications[name]
		if !app.Enable {
			continue
		}
		np.Applications[name] = app.Settings
		appModules = append(appModules, app.Module)
		var bad error
		definition.WalkPaths(app.Settings, field.Path("").Key("applications").Key(name).Key("settings"), func(p field.Path, rp data.RepoPath) {
			if err := def.Tree.Check(rp); err != nil && bad == nil {
				bad = &field.Error{Source: "deployment", Path: p, Reason: err.Error()}
			}
			roots = append(roots, rp)
		})
		if bad != nil {
			return nil, bad
		}
	}
	np.Modules = moduleList(node.Modules, appModules)
	roots = append(roots, np.Modules...)
	if def.Builder != "" {
		roots = append(roots, def.Builder)
	}

	planJSON, err := np.JSON()
	if err != nil {
		return nil, err
	}
	dir := NodeDir(stateDir, s.Node)
	treeFromNode, err := filepath.Rel(dir, def.Tree.Root)
	if err != nil {
		return nil, err
	}
	conf := Configuration(&np, treeFromNode)
	for _, r := range roots {
		if err := def.Tree.Check(r); err != nil {
			return nil, fmt.Errorf("%s: %w", s.Node, err)
		}
	}
	return &Node{
		Name: s.Node, Group: s.Group, Plan: np,
		PlanJSON: planJSON, Configuration: conf, TreeFiles: in.files,
		NixosConf: NixosConf(planJSON, conf, in.treeDigest, def.System(), in.nixpkgs),
		Dir:       dir,
		build: Build{StateDir: stateDir, Tree: def.Tree.Root, NodeDir: dir,
			System: def.System(), Nixpkgs: def.Nixpkgs},
	}, nil
}
