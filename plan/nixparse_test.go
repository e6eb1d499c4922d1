package plan

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/nix/nixtest"
)

// Every Nix file of switchyard's library, the example tree and the test trees parses.
func TestNixFilesParse(t *testing.T) {
	tool := nixtest.Require(t, "nix-instantiate")[0]
	var files []string
	for _, dir := range []string{repo("nix"), repo("examples", "tree"), repo("examples", "tree-nixos"), repo("plan", "testdata")} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".nix") {
				files = append(files, p)
			}
			return err
		})
	}
	if len(files) < 15 {
		t.Fatalf("found only %d .nix files", len(files))
	}
	for _, f := range files {
		if out, err := exec.Command(tool, "--parse", f).CombinedOutput(); err != nil {
			t.Errorf("%s does not parse: %v\n%s", f, err, out)
		}
	}
}
