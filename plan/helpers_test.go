package plan

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchyard-nix/switchyard/nix/nixtest"
	"github.com/switchyard-nix/switchyard/plan/coordinates"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/testbed"
)

func repo(parts ...string) string {
	return filepath.Join(append([]string{testbed.RepoRoot()}, parts...)...)
}

// load loads a tree's definition; a deployment.nix needs nix-instantiate.
func load(t testing.TB, dir string) *definition.Definition {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, definition.NixFile)); err == nil {
		nixtest.Require(t, "nix-instantiate")
	}
	def, err := definition.Load(context.Background(), dir)
	if err != nil {
		t.Fatalf("loading %s: %v", dir, err)
	}
	return def
}

type run struct {
	method     string
	deployment string
	coords     map[string]string
	stateDir   string
	group      string
	nodes      []string
	credDirs   []string // the credential directories a submitted credential may lie under
}

// compute loads, merges and computes; stateDir defaults to <tree>/.switchyard.
func compute(t testing.TB, dir string, r run) *Plan {
	t.Helper()
	p, err := tryCompute(t, dir, r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func tryCompute(t testing.TB, dir string, r run) (*Plan, error) {
	t.Helper()
	def := load(t, dir)
	if r.method == "" {
		r.method = "ssh"
	}
	m, ok := method.Lookup(r.method)
	if !ok {
		t.Fatalf("no method %s", r.method)
	}
	if r.stateDir == "" {
		r.stateDir = filepath.Join(dir, ".switchyard")
	}
	d, err := merge.Merge(def, m, []byte(r.deployment), merge.Options{CredentialDirs: r.credDirs, Exclude: []string{r.stateDir}})
	if err != nil {
		return nil, err
	}
	return Compute(d, coordinates.Fixed(m.Coordinates, r.coords), Options{StateDir: r.stateDir, Group: r.group, Nodes: r.nodes})
}

func node(t testing.TB, p *Plan, name string) *Node {
	t.Helper()
	for _, n := range p.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("node %s not planned", name)
	return nil
}

// copyTree copies a directory tree (files and symlinks) into a new temporary directory.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "tree")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, target)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			info, _ := d.Info()
			return os.WriteFile(target, b, info.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func writeTestFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
