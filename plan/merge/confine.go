package merge

import (
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/credential"
	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// confineSetting refuses a submitted method setting its kind keeps from a submission
// (SPEC 6.9): an anchor, or a credential file outside the credential directories. The
// credential is checked before anything opens it; the refusal never names its path.
func (d *Deployment) confineSetting(at field.Path, key string, v any) error {
	s, _ := d.Method.Setting(key)
	switch s.Kind {
	case method.Anchor:
		return field.Errorf(at, "set by the tree only: an anchor (what vouches for a node or holds the deployer's state and endpoints) "+
			"is the tree's deployment-method.%s.%s, never a submission's", d.Method.Name, key)
	case method.Credential:
		file, _ := v.(string)
		if file == "" {
			return nil
		}
		if err := credential.Check(file, d.opt.CredentialDirs); err != nil {
			return field.Errorf(at, "credential file refused: %v", err)
		}
	}
	return nil
}

// confinePaths refuses a tree path of a submitted application's settings that its baked
// setting does not allow (SPEC 6.9): every tree path must lie under the directory of a
// path the tree baked at the same place (an object's key by key; anywhere in a list), and
// inside what nixos_conf covers. A setting baked as null, {} or a non-path takes no tree path.
func (d *Deployment) confinePaths(baked map[string]any, submitted any, at field.Path) error {
	sub, _ := submitted.(map[string]any)
	for _, key := range slices.Sorted(maps.Keys(sub)) {
		if err := d.confineValue(baked[key], sub[key], at.Key(key)); err != nil {
			return err
		}
	}
	return nil
}

func (d *Deployment) confineValue(baked, submitted any, at field.Path) error {
	if b, ok := baked.(map[string]any); ok {
		if s, ok := submitted.(map[string]any); ok && len(b) > 0 {
			return d.confinePaths(b, s, at)
		}
	}
	dirs := bakedDirs(baked)
	var err error
	definition.WalkPaths(submitted, at, func(pat field.Path, p data.RepoPath) {
		if err == nil {
			err = d.confinePath(pat, p, dirs)
		}
	})
	return err
}

// bakedDirs is the directory of every tree path in a baked value ("" for the tree's root).
func bakedDirs(baked any) []string {
	var dirs []string
	definition.WalkPaths(baked, "", func(_ field.Path, p data.RepoPath) {
		dir := path.Dir(string(p))
		if dir == "." {
			dir = ""
		}
		dirs = append(dirs, dir)
	})
	return dirs
}

func (d *Deployment) confinePath(at field.Path, p data.RepoPath, dirs []string) error {
	if len(dirs) == 0 {
		return field.Errorf(at, "a tree path where the tree baked none: this setting takes no file of the tree")
	}
	if !slices.ContainsFunc(dirs, func(dir string) bool { return dir == "" || strings.HasPrefix(string(p), dir+"/") }) {
		return field.Errorf(at, "%s is not under %s/, the directory of the setting's baked path", p, dirs[0])
	}
	if err := d.Definition.Tree.Check(p); err != nil {
		return field.Errorf(at, "%v", err)
	}
	if why := d.Definition.Tree.Uncovered(p, d.opt.Exclude); why != "" {
		return field.Errorf(at, "%s is %s, which no node's configuration may read", p, why)
	}
	return nil
}
