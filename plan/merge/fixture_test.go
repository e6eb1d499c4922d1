package merge

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/tree"
)

// fixture is the tree baked() reads its paths in and a credential directory with one
// staged key, made once for the package's tests.
var fixture struct {
	root, creds, key string
	tree             *tree.Tree
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "merge-test-")
	if err != nil {
		panic(err)
	}
	code := makeFixture(dir)
	if code == 0 {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func makeFixture(dir string) int {
	fixture.root = filepath.Join(dir, "tree")
	fixture.creds = filepath.Join(dir, "creds")
	fixture.key = filepath.Join(fixture.creds, "key")
	for name, content := range map[string]string{
		"certs/web.pem": "web", "certs/other.pem": "other", "certs/sub/deep.pem": "deep", "a": "a",
		"files/motd.txt": "hi", ".git/config": "[remote] url = https://token@example.invalid",
		"certs/.git/config": "nested", "state/nodes/web1/plan.json": "{}",
	} {
		p := filepath.Join(fixture.root, name)
		if os.MkdirAll(filepath.Dir(p), 0o755) != nil || os.WriteFile(p, []byte(content), 0o644) != nil {
			return 1
		}
	}
	if os.Symlink("../.git/config", filepath.Join(fixture.root, "certs/git.pem")) != nil {
		return 1
	}
	if os.MkdirAll(fixture.creds, 0o700) != nil || os.WriteFile(fixture.key, []byte("secret"), 0o600) != nil {
		return 1
	}
	t, err := tree.Open(fixture.root)
	if err != nil {
		return 1
	}
	fixture.tree = t
	return 0
}

// opts confines the tests' submissions: the fixture's credential directory, and its
// state dir left out of the tree's inputs.
func opts() Options {
	return Options{CredentialDirs: []string{fixture.creds}, Exclude: []string{filepath.Join(fixture.root, "state")}}
}
