package nix

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// leftOut is every entry of the repository root that src.nix leaves out of the package's
// source, and why: none of them is read by the build or by `go test ./...`.
var leftOut = map[string]string{
	".git":          "Git's own",
	".shellcheckrc": "the lint tier's",
	"flake.lock":    "the flake's inputs, not the package's",
	"flake.nix":     "the flake itself: editing it must not rebuild the package",
	"vendor":        "go mod vendor's, made by the build (buildGoModule's goModules)",
}

// srcEntries is src.nix's list, read as testbed/checkphase.sh reads it: one quoted name
// per line.
func srcEntries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("src.nix")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s*"([^"]+)"\s*$`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// Every root entry is in src.nix or left out on purpose, and every entry of src.nix
// exists, so a new package cannot be missing from the flake's source unseen.
func TestSourceFilesetCoversTheRoot(t *testing.T) {
	src := srcEntries(t)
	if !slices.IsSorted(src) || len(src) < 10 {
		t.Fatalf("src.nix: %d entries, want a sorted list of the root's entries: %v", len(src), src)
	}
	for _, name := range src {
		if _, err := os.Lstat(filepath.Join("..", name)); err != nil {
			t.Errorf("src.nix names %s: %v", name, err)
		}
		if _, ok := leftOut[name]; ok {
			t.Errorf("%s is both in src.nix and left out", name)
		}
	}
	root, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range root {
		if _, ok := leftOut[e.Name()]; !ok && !slices.Contains(src, e.Name()) && !strings.HasPrefix(e.Name(), "result") {
			t.Errorf("root entry %s is neither in src.nix nor left out on purpose", e.Name())
		}
	}
}
