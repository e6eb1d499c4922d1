package tree

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/plan/data"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLiterals(t *testing.T) {
	src := `{ imports = [ ./a.nix ../b/c.nix ./d ]; x = "${./e.txt}"; y = ./.; z = a./b; u = https://x/y;
	  # see ./f.md
	  w = <nixpkgs/lib>; v = /abs/path; q = ./a.nix; r = ./dir/; }`
	want := []string{"./a.nix", "../b/c.nix", "./d", "./e.txt", "./.", "./f.md", "./dir"}
	if d := cmp.Diff(want, Literals([]byte(src))); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tree", "a.nix"), "")
	write(t, filepath.Join(dir, "outside.nix"), "")
	os.Symlink("../outside.nix", filepath.Join(dir, "tree", "out.nix"))
	os.Symlink("a.nix", filepath.Join(dir, "tree", "in.nix"))
	os.Symlink(".", filepath.Join(dir, "tree", "self"))
	tr, err := Open(filepath.Join(dir, "tree"))
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[data.RepoPath]string{
		"a.nix":      "",
		"in.nix":     "",
		"self/a.nix": "",
		"out.nix":    "leaves the tree through a symlink",
		"nope.nix":   "does not exist",
		"self":       "is the tree itself",
		"../x":       "leaves the tree",
		"/etc":       "absolute",
	} {
		err := tr.Check(p)
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("Check(%q) = %v, want %q", p, err, want)
		}
	}
	if _, err := Open(filepath.Join(dir, "outside.nix")); err == nil {
		t.Error("a file opened as a tree")
	}
}

func TestFiles(t *testing.T) {
	root := filepath.Join(t.TempDir(), "tree")
	write(t, filepath.Join(root, "hosts", "web1.nix"), "{ imports = [ ./common.nix ../lib ../missing.nix ../../outside.nix ]; }")
	write(t, filepath.Join(root, "hosts", "common.nix"), "{ x = ../files/motd.txt; y = ./web1.nix; }") // a cycle back
	write(t, filepath.Join(root, "hosts", "web2.nix"), "not reached")
	write(t, filepath.Join(root, "lib", "default.nix"), "{ imports = [ ./helpers.nix ]; }")
	write(t, filepath.Join(root, "lib", "helpers.nix"), "{ }")
	write(t, filepath.Join(root, "lib", "data.bin"), "\x00\x01")
	write(t, filepath.Join(root, "lib", ".git", "HEAD"), "ref")
	write(t, filepath.Join(root, "files", "motd.txt"), "hi")
	write(t, filepath.Join(filepath.Dir(root), "outside.nix"), "{ }")
	os.Symlink("helpers.nix", filepath.Join(root, "lib", "link.nix"))
	if err := os.Chmod(filepath.Join(root, "lib", "helpers.nix"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	files, err := tr.Files([]data.RepoPath{"hosts/web1.nix"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Kind+" "+f.Path+" "+string(f.Content))
	}
	want := []string{
		"file files/motd.txt hi",
		"file hosts/common.nix { x = ../files/motd.txt; y = ./web1.nix; }",
		"file hosts/web1.nix { imports = [ ./common.nix ../lib ../missing.nix ../../outside.nix ]; }",
		"file lib/data.bin \x00\x01",
		"file lib/default.nix { imports = [ ./helpers.nix ]; }",
		"executable lib/helpers.nix { }",
		"symlink lib/link.nix helpers.nix",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}

	// The whole tree through ./., without the excluded state dir.
	write(t, filepath.Join(root, "top.nix"), "import ./.")
	write(t, filepath.Join(root, ".switchyard", "nodes", "web1", "plan.json"), "{}")
	files, err = tr.Files([]data.RepoPath{"top.nix"}, []string{filepath.Join(root, ".switchyard")})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasPrefix(f.Path, ".switchyard") || strings.Contains(f.Path, ".git") {
			t.Errorf("%s collected", f.Path)
		}
	}
	if len(files) != 9 {
		t.Errorf("collected %d files through ./., want 9", len(files))
	}
	if _, err := tr.Files([]data.RepoPath{"nope.nix"}, nil); err == nil {
		t.Error("a missing root is not an error")
	}
}
