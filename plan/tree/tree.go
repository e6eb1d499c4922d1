package tree

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/data"
)

// Tree is an operator tree: a directory.
type Tree struct {
	Root string // absolute and clean, as given
	real string // Root with its symlinks resolved
}

// Open opens the tree at dir.
func Open(dir string) (*Tree, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("operator tree %s: %w", abs, err)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("operator tree %s: %w", abs, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("operator tree %s is not a directory", abs)
	}
	return &Tree{Root: abs, real: real}, nil
}

// Path is the absolute path of a tree path (not resolved).
func (t *Tree) Path(p data.RepoPath) string {
	return filepath.Join(t.Root, filepath.FromSlash(string(p)))
}

// Check makes sure p exists in the tree and stays in it through every symlink. Its error
// says why not, without the field path (the caller knows it).
func (t *Tree) Check(p data.RepoPath) error {
	if _, err := data.CleanRepoPath(string(p)); err != nil {
		return err
	}
	_, err := t.resolve(t.Path(p), string(p))
	return err
}

// resolve resolves symlinks and refuses a result outside the tree or missing.
func (t *Tree) resolve(abs, shown string) (string, error) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s does not exist in the tree", shown)
		}
		return "", fmt.Errorf("%s: %w", shown, err)
	}
	if !t.inside(real) {
		return "", fmt.Errorf("%s leaves the tree through a symlink (to %s)", shown, real)
	}
	if real == t.real {
		return "", fmt.Errorf("%s is the tree itself", shown)
	}
	return real, nil
}

func (t *Tree) inside(real string) bool {
	return real == t.real || strings.HasPrefix(real, t.real+string(filepath.Separator))
}

// rel is a resolved path relative to the tree, slash-separated.
func (t *Tree) rel(real string) string {
	r, _ := filepath.Rel(t.real, real)
	return filepath.ToSlash(r)
}

// Contains says whether the path abs (symlinks resolved) is in the tree, and where.
func (t *Tree) Contains(abs string) (string, bool) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil || !t.inside(real) {
		return "", false
	}
	return t.rel(real), true
}
