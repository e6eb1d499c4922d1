package effects

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/switchyard-nix/switchyard/"

// imports lists the module-internal imports of a package's non-test files.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.HasPrefix(p, module) {
				out = append(out, strings.TrimPrefix(p, module))
			}
		}
	}
	return out
}

// The body sees transports only through the interface declared here: it never
// imports one, and the verdict package depends on neither.
func TestPackageRules(t *testing.T) {
	for _, imp := range imports(t, ".") {
		if strings.HasPrefix(imp, "transports") || strings.HasPrefix(imp, "cmd") {
			t.Errorf("effects imports %s: the body must not know a transport or the command line", imp)
		}
	}
	for _, imp := range imports(t, filepath.Join("..", "verdict")) {
		t.Errorf("verdict imports %s: classification must stay free of the body and transports", imp)
	}
	for _, p := range PhaseNames() {
		for _, word := range []string{"ssh", "incus", "shell", "tofu", "scp", "rsync"} {
			if strings.Contains(p, word) {
				t.Errorf("phase %q is named after a transport", p)
			}
		}
	}
}
