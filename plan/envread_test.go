package plan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The one file under plan/ that may read the process environment (SPEC 6.5).
const environmentFile = "coordinates/environment.go"

// envReads are the functions that read the process environment, by package.
var envReads = map[string][]string{
	"os":      {"Getenv", "LookupEnv", "Environ", "ExpandEnv"},
	"syscall": {"Getenv", "Environ"},
}

// environmentReads lists every use of an environment-reading function in Go source, as
// "file:line: pkg.Func", whatever name the package is imported under.
func environmentReads(fset *token.FileSet, f *ast.File) []string {
	local := map[string]string{} // local name -> package path
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := envReads[path]; !ok {
			continue
		}
		name := path
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = path
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		pkg, ok := local[id.Name]
		if !ok {
			return true
		}
		for _, fn := range envReads[pkg] {
			if sel.Sel.Name == fn {
				out = append(out, fset.Position(sel.Pos()).String()+": "+pkg+"."+fn)
			}
		}
		return true
	})
	return out
}

// Every environment read of the plan goes through the coordinate registry: no Go file
// under plan/ (tests included) but coordinates/environment.go reads the environment.
func TestNoEnvironmentReadsOutsideCoordinates(t *testing.T) {
	root := "."
	fset := token.NewFileSet()
	sawAllowed := false
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		reads := environmentReads(fset, f)
		if filepath.ToSlash(p) == environmentFile {
			sawAllowed = len(reads) > 0
			return nil
		}
		for _, r := range reads {
			t.Errorf("%s: read the environment through a declared coordinate (plan/coordinates) instead", r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !sawAllowed {
		t.Errorf("%s reads no environment: the check would see nothing", environmentFile)
	}
}

// The check itself finds reads however os is imported.
func TestEnvironmentReadsFound(t *testing.T) {
	src := `package x
import (
	"os"
	sys "syscall"
	o2 "os"
)
var f = os.Getenv
func g() {
	_, _ = os.LookupEnv("A")
	_ = o2.Environ()
	_, _ = sys.Getenv("B")
	_ = os.Getpid()
}`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := environmentReads(fset, f)
	if len(got) != 4 {
		t.Errorf("found %d reads, want 4: %v", len(got), got)
	}
}
