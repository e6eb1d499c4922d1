package tree

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/data"
)

// File is a tree file a node reads.
type File struct {
	Path    string // relative to the tree (symlinks in its location resolved), slash-separated
	Kind    string // "file", "executable" or "symlink"
	Content []byte // a file's bytes, or a symlink's target
}

// Skipped names directories never collected: version control.
var Skipped = []string{".git", ".hg", ".jj"}

// relativeLiteral is a Nix path literal relative to its file: ./x, ../x, ./. (the
// Nix lexer's PATH_CHAR set), not preceded by a character that would make it part of
// something else.
var relativeLiteral = regexp.MustCompile(`(?:^|[^A-Za-z0-9._+\-/~])(\.\.?(?:/[A-Za-z0-9._+\-]+)+)`)

// Files is every tree file a node reads, sorted by path, starting from roots (its
// modules, its builder, the tree paths in its plan):
//
//   - a root or reached file is read whole; a root or reached directory contributes every
//     file under it (symlinks under it as their target text, as Nix copies them);
//   - every relative path literal (./x, ../x) in a reached .nix file that names an
//     existing path inside the tree is reached in turn, transitively;
//   - literals naming paths outside the tree, or missing ones, are not tree files and
//     are skipped, as are version-control directories and the directories in exclude
//     (the state dir, when it lies in the tree).
//
// A root that does not exist or leaves the tree is an error.
func (t *Tree) Files(roots []data.RepoPath, exclude []string) ([]File, error) {
	c := collector{t: t, seen: map[string]bool{}, files: map[string]File{}}
	for _, e := range exclude {
		if real, err := filepath.EvalSymlinks(e); err == nil {
			c.exclude = append(c.exclude, real)
		}
	}
	for _, p := range roots {
		if err := t.Check(p); err != nil {
			return nil, err
		}
		real, err := t.resolve(t.Path(p), string(p))
		if err != nil {
			return nil, err
		}
		if err := c.reach(real); err != nil {
			return nil, err
		}
	}
	out := make([]File, 0, len(c.files))
	for _, f := range c.files {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

type collector struct {
	t       *Tree
	exclude []string
	seen    map[string]bool
	files   map[string]File
}

func (c *collector) excluded(real string) bool {
	for _, e := range c.exclude {
		if real == e || strings.HasPrefix(real, e+string(filepath.Separator)) {
			return true
		}
	}
	for _, s := range Skipped {
		for _, el := range strings.Split(c.t.rel(real), "/") {
			if el == s {
				return true
			}
		}
	}
	return false
}

// reach collects a resolved path inside the tree: a file, or a directory's files.
func (c *collector) reach(real string) error {
	if c.seen[real] || c.excluded(real) {
		return nil
	}
	c.seen[real] = true
	st, err := os.Stat(real)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return c.file(real, st.Mode())
	}
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if c.excluded(p) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			rel := c.t.rel(p)
			c.files[rel] = File{Path: rel, Kind: "symlink", Content: []byte(target)}
		case d.Type().IsRegular():
			if c.seen[p] && p != real {
				return nil
			}
			c.seen[p] = true
			info, err := d.Info()
			if err != nil {
				return err
			}
			return c.file(p, info.Mode())
		}
		return nil
	})
}

func (c *collector) file(real string, mode fs.FileMode) error {
	if !mode.IsRegular() {
		return nil
	}
	content, err := os.ReadFile(real)
	if err != nil {
		return err
	}
	kind := "file"
	if mode&0o111 != 0 {
		kind = "executable"
	}
	rel := c.t.rel(real)
	c.files[rel] = File{Path: rel, Kind: kind, Content: content}
	if !strings.HasSuffix(real, ".nix") {
		return nil
	}
	for _, lit := range Literals(content) {
		target := filepath.Join(filepath.Dir(real), filepath.FromSlash(lit))
		resolved, err := filepath.EvalSymlinks(target)
		if err != nil || !c.t.inside(resolved) {
			continue // missing, or not a tree file
		}
		if err := c.reach(resolved); err != nil {
			return fmt.Errorf("%s (named in %s): %w", lit, rel, err)
		}
	}
	return nil
}

// Literals is the relative path literals (./x, ../x) in Nix source, in order, once each.
// It reads the text, not the syntax: a literal in a comment or a string counts too,
// which can only add files.
func Literals(src []byte) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range relativeLiteral.FindAllSubmatch(src, -1) {
		lit := string(bytes.TrimSuffix(m[1], []byte("/")))
		if !seen[lit] {
			seen[lit] = true
			out = append(out, lit)
		}
	}
	return out
}
