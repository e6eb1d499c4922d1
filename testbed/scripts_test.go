package testbed

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// hostURL is a URL with a host name in it: what the scripts must read from the
// machine's configuration (apt sources, go env GOPROXY), never name (issue 29 item 7).
var hostURL = regexp.MustCompile(`https?://[A-Za-z0-9]`)

// TestScriptsNameNoHost: the README's scripts and CI's name no host of a package
// registry or mirror, in code or comments.
func TestScriptsNameNoHost(t *testing.T) {
	root := RepoRoot()
	files, _ := filepath.Glob(filepath.Join(root, "testbed", "*.sh"))
	more, _ := filepath.Glob(filepath.Join(root, "testbed", "*", "*.sh"))
	files = append(append(files, more...), filepath.Join(root, ".ci", "run"))
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if hostURL.MatchString(line) {
				t.Errorf("%s:%d names a host: %s", strings.TrimPrefix(f, root+"/"), i+1, strings.TrimSpace(line))
			}
		}
	}
}
