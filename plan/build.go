package plan

import (
	"path/filepath"
)

// Build is what nix/build.nix needs to evaluate a node's toplevel.
type Build struct {
	StateDir string // absolute; build.nix is <StateDir>/nix/build.nix
	Tree     string // the operator tree, absolute
	NodeDir  string // the node's directory (plan.json, configuration.nix), absolute
	System   string // "nixos", or the tree path of the builder
	Nixpkgs  string // a path to nixpkgs, for System "nixos"; may be empty
}

// EvalArgv is the nix-instantiate command that evaluates a node's toplevel derivation and
// prints its .drv path (SPEC 6.1): nix/build.nix applied to the tree, the node's
// directory and the deployment's system, attribute toplevel.
func EvalArgv(b Build) []string {
	argv := []string{"nix-instantiate",
		"--argstr", "tree", b.Tree,
		"--argstr", "nodeDir", b.NodeDir,
		"--argstr", "system", b.System,
	}
	if b.Nixpkgs != "" {
		argv = append(argv, "--argstr", "nixpkgs", b.Nixpkgs)
	}
	return append(argv, "--attr", "toplevel", "--", filepath.Join(b.StateDir, "nix", "build.nix"))
}
