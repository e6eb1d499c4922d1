package tree

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/nix/nixtest"

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

// Files is every file of the tree but version control, the default state dir and the
// excluded directories; a symlink out of the tree also holds what it reaches.
func TestFiles(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "tree")
	write(t, filepath.Join(root, "hosts", "web1.nix"), "{ }")
	write(t, filepath.Join(root, "lib", "data.bin"), "\x00\x01")
	write(t, filepath.Join(root, "lib", "helpers.nix"), "{ }")
	write(t, filepath.Join(root, "lib", ".git", "HEAD"), "ref")
	write(t, filepath.Join(root, ".switchyard", "nodes", "web1", "receipt.json"), "{}")
	write(t, filepath.Join(root, "state", "nodes", "web1", "plan.json"), "{}")
	write(t, filepath.Join(base, "outside", "x.nix"), "{ }")
	os.Symlink("helpers.nix", filepath.Join(root, "lib", "link.nix"))
	os.Symlink("../../outside", filepath.Join(root, "lib", "out"))
	os.Symlink("nope", filepath.Join(root, "lib", "dangling"))
	if err := os.Chmod(filepath.Join(root, "lib", "helpers.nix"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	files, err := tr.Files([]string{filepath.Join(root, "state")})
	if err != nil {
		t.Fatal(err)
	}
	outside, err := Content(filepath.Join(base, "outside"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Kind+" "+f.Path+" "+string(f.Content))
	}
	want := []string{
		"file hosts/web1.nix { }",
		"symlink lib/dangling nope",
		"file lib/data.bin \x00\x01",
		"executable lib/helpers.nix { }",
		"symlink lib/link.nix helpers.nix",
		"symlink lib/out ../../outside",
		"outside lib/out " + outside,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// Content is a store object's path, or a digest of the files under a path, however
// it is reached; it changes with any file under it.
func TestContent(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "nixpkgs", "default.nix"), "1")
	os.Symlink("nixpkgs", filepath.Join(dir, "link"))
	a, err := Content(filepath.Join(dir, "nixpkgs"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := Content(filepath.Join(dir, "link")); a != b || !strings.HasPrefix(a, "sha256 ") {
		t.Errorf("through a symlink %q, directly %q", b, a)
	}
	write(t, filepath.Join(dir, "nixpkgs", "lib", "new.nix"), "")
	if b, _ := Content(filepath.Join(dir, "nixpkgs")); a == b {
		t.Error("a new file left the content unchanged")
	}
	store := runNix(t, "nix-store", "--add", filepath.Join(dir, "nixpkgs"))
	if got, err := Content(store + "/lib"); got != "store "+store+"/lib" {
		t.Errorf("a store path: %q %v", got, err)
	}
}

func runNix(t *testing.T, argv ...string) string {
	t.Helper()
	nixtest.Require(t, argv[0])
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatalf("%v: %v", argv, err)
	}
	return strings.TrimSpace(string(out))
}

func TestEnvReads(t *testing.T) {
	src := "{ lib, ... }:\n# builtins.getEnv \"COMMENTED\"\nwith builtins; {\n  a = builtins.getEnv \"HOME\";\n  b = getEnv name; # getEnv \"NOT\"\n}\n"
	want := []EnvRead{{Line: 4, Name: "HOME"}, {Line: 5}}
	if d := cmp.Diff(want, EnvReads([]byte(src))); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if got := EnvReads([]byte("{ getEnvironment = 1; }")); len(got) != 0 {
		t.Errorf("not a read: %v", got)
	}
}
