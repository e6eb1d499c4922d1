package data

import (
	"fmt"
	"path"
	"strings"
)

// RepoPath is a file or directory of the operator tree, relative to the tree's root,
// clean, never absolute, never leaving the tree lexically ("..") and never the root
// itself. In JSON it is {"_repoPath": "<path>"}; the Nix reader (nix/lib.nix) maps it
// back to a path in the tree.
type RepoPath string

// RepoPathKey is the one key of a RepoPath's JSON object.
const RepoPathKey = "_repoPath"

// CleanRepoPath checks a relative tree path lexically and returns it cleaned. Whether
// it exists and stays in the tree through symlinks is checked against the tree itself
// (package tree).
func CleanRepoPath(s string) (RepoPath, error) {
	switch {
	case s == "":
		return "", fmt.Errorf("empty path")
	case strings.ContainsRune(s, 0):
		return "", fmt.Errorf("path %q holds a NUL byte", s)
	case strings.HasPrefix(s, "/"):
		return "", fmt.Errorf("path %q is absolute: module paths are relative to the tree", s)
	case strings.HasPrefix(s, "~"):
		return "", fmt.Errorf("path %q is not relative to the tree", s)
	}
	for _, el := range strings.Split(s, "/") {
		if el == ".." {
			return "", fmt.Errorf("path %q leaves the tree (..)", s)
		}
	}
	c := path.Clean(s)
	if c == "." {
		return "", fmt.Errorf("path %q names the tree itself, not a file in it", s)
	}
	return RepoPath(c), nil
}
