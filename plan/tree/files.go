package tree

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/data"
)

// File is a file of the tree.
type File struct {
	Path    string // relative to the tree, slash-separated
	Kind    string // "file", "executable", "symlink", "unreadable", or "outside" (see Files)
	Content []byte // a file's bytes, a symlink's target, or what a symlink out reaches (Content)
}

// Skipped names directories never collected: version control, and switchyard's default
// state dir (its receipts change at every apply; a state dir given elsewhere in the tree
// is excluded by the caller).
var Skipped = []string{".git", ".hg", ".jj", ".switchyard"}

// StoreDir is the Nix store: a path in it is a store object, which never changes.
const StoreDir = "/nix/store/"

// Files is every file of the tree, sorted by path: all a node's evaluation can read of
// the tree. No module's source is parsed to find what it reads, because Nix reaches files
// through expressions no parser of literals sees (`./${name}.nix`, `dirOf __curPos.file`,
// Nix code in a file not named .nix): a change to any file of the tree is a change of
// every node's input. That costs an evaluation when an unrelated file changes, never a
// missed redeploy.
//
// Version-control directories and the paths in exclude (the state dir, a saved plan)
// are left out. A symlink is its target text; one that leads out of the tree (to a file or a
// directory) is also an "outside" entry holding Content of what it reaches, since the
// evaluation reads through it.
func (t *Tree) Files(exclude []string) ([]File, error) {
	var ex []string
	for _, e := range exclude {
		if e == "" {
			continue
		}
		abs, err := filepath.Abs(e)
		if err != nil {
			return nil, err
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			ex = append(ex, real)
		}
	}
	skip := func(real string) bool {
		for _, e := range ex {
			if real == e || strings.HasPrefix(real, e+string(filepath.Separator)) {
				return true
			}
		}
		for _, s := range Skipped {
			if filepath.Base(real) == s {
				return true
			}
		}
		return false
	}
	var out []File
	err := walk(t.real, skip, func(p string, f File) error {
		f.Path = t.rel(p)
		out = append(out, f)
		if f.Kind != "symlink" {
			return nil
		}
		target, err := filepath.EvalSymlinks(p)
		if err != nil || t.inside(target) {
			return nil // dangling (Nix cannot read it either), or read as a tree file
		}
		id, err := Content(target)
		if err != nil {
			return fmt.Errorf("%s (a symlink out of the tree): %w", f.Path, err)
		}
		out = append(out, File{Path: f.Path, Kind: "outside", Content: []byte(id)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// walk calls fn for every file and symlink under root (a directory, symlinks resolved),
// in lexical order, skipping the directories skip names. Symlinks are not followed.
func walk(root string, skip func(string) bool, fn func(path string, f File) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrPermission) {
			// What this user cannot read, its evaluation cannot either: only that it
			// is there counts.
			return fn(p, File{Kind: "unreadable"})
		}
		if err != nil {
			return err
		}
		if p != root && skip(p) {
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
			return fn(p, File{Kind: "symlink", Content: []byte(target)})
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			content, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrPermission) {
				return fn(p, File{Kind: "unreadable"})
			}
			if err != nil {
				return err
			}
			kind := "file"
			if info.Mode()&0o111 != 0 {
				kind = "executable"
			}
			return fn(p, File{Kind: kind, Content: content})
		}
		return nil
	})
}

// Content identifies what is at path (symlinks resolved) by its content, never by where
// it is: a store object by its store path (a store object never changes, and its path
// is derived from what it holds), anything else by a SHA-256 over its files (each with
// its path relative to path, kind and content; symlinks under it as their target text).
// It is how nixos_conf covers nixpkgs (a checkout whose commit moves keeps its path) and
// what a symlink out of the tree reaches.
func Content(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(real, StoreDir) {
		return "store " + real, nil
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if !st.IsDir() {
		b, err := os.ReadFile(real)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%o %d:", st.Mode().Perm()&0o111, len(b))
		h.Write(b)
		return "sha256 " + hex.EncodeToString(h.Sum(nil)), nil
	}
	err = walk(real, func(string) bool { return false }, func(p string, f File) error {
		rel, _ := filepath.Rel(real, p)
		fmt.Fprintf(h, "%d:%s %s %d:", len(rel), filepath.ToSlash(rel), f.Kind, len(f.Content))
		h.Write(f.Content)
		return nil
	})
	if err != nil {
		return "", err
	}
	return "sha256 " + hex.EncodeToString(h.Sum(nil)), nil
}

// getEnv is a call of builtins.getEnv (or getEnv, as `with builtins;` makes it), with
// the variable's name when it is a string literal.
var getEnv = regexp.MustCompile(`\bgetEnv\b(?:\s*"([^"]*)")?`)

// EnvRead is a read of the environment in a tree file's Nix source.
type EnvRead struct {
	Line int
	Name string // the variable, when the source names it literally
}

// EnvReads finds the environment reads in Nix source: every getEnv outside a line
// comment. It reads the text, not the syntax (a getEnv in a string or a block comment
// counts); a read it cannot see (a name built at run time) reads nothing, as the
// evaluation runs without the caller's environment.
func EnvReads(src []byte) []EnvRead {
	var out []EnvRead
	for i, line := range strings.Split(string(src), "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		for _, m := range getEnv.FindAllStringSubmatch(line, -1) {
			out = append(out, EnvRead{Line: i + 1, Name: m[1]})
		}
	}
	return out
}

// Uncovered says why the tree path p lies where Files does not look (a version-control
// directory, switchyard's state dir, a path of exclude), as written or with its symlinks
// resolved; "" when Files covers it. A node's input outside Files would be read without
// nixos_conf seeing it change.
func (t *Tree) Uncovered(p data.RepoPath, exclude []string) string {
	shown := strings.Split(string(p), "/")
	real, err := filepath.EvalSymlinks(t.Path(p))
	if err != nil {
		real = t.Path(p)
	}
	names := append(shown, strings.Split(t.rel(real), "/")...)
	for _, n := range names {
		if slices.Contains(Skipped, n) {
			return "under " + n
		}
	}
	for _, e := range exclude {
		if e == "" {
			continue
		}
		re, err := filepath.EvalSymlinks(e)
		if err != nil {
			re = filepath.Clean(e)
		}
		if real == re || strings.HasPrefix(real, re+string(filepath.Separator)) {
			return "switchyard's own (the state dir or a saved plan)"
		}
	}
	return ""
}
