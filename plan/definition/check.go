package definition

import (
	"maps"
	"slices"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/tree"
)

// checkTree makes sure every tree path of the definition exists in the tree and stays in
// it, symlinks resolved.
func (d *Definition) checkTree(t *tree.Tree) error {
	var err error
	check := func(at field.Path, p data.RepoPath) {
		if err == nil && p != "" {
			if e := t.Check(p); e != nil {
				err = field.Errorf(at, "%v", e)
			}
		}
	}
	check(field.Path("").Key("system"), d.Builder)
	check(field.Path("").Key("submissions").Key("allowedSigners"), d.Submissions.AllowedSigners)
	for _, name := range slices.Sorted(maps.Keys(d.Applications)) {
		a := d.Applications[name]
		at := field.Path("").Key("applications").Key(name)
		check(at.Key("module"), a.Module)
		WalkPaths(a.Settings, at.Key("settings"), check)
	}
	for _, g := range slices.Sorted(maps.Keys(d.Groups)) {
		for _, n := range slices.Sorted(maps.Keys(d.Groups[g].Nodes)) {
			at := field.Path("").Key("groups").Key(g).Key("nodes").Key(n).Key("modules")
			for i, m := range d.Groups[g].Nodes[n].Modules {
				check(at.Index(i), m)
			}
		}
	}
	return err
}

// WalkPaths calls fn with every tree path in a data value and its field path, in a
// stable order.
func WalkPaths(v any, at field.Path, fn func(field.Path, data.RepoPath)) {
	switch t := v.(type) {
	case data.RepoPath:
		fn(at, t)
	case []any:
		for i, e := range t {
			WalkPaths(e, at.Index(i), fn)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			WalkPaths(t[k], at.Key(k), fn)
		}
	}
}
