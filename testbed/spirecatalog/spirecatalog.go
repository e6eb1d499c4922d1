// Package spirecatalog prunes SPIRE's server catalog to the built-in plugins the test
// bed configures (testbed/spireserver's config: DataStore sql, KeyManager memory,
// NodeAttestor join_token), so the test bed builds spire-server without the cloud and
// Kubernetes SDKs the other plugins import.
package spirecatalog

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// pluginRoot is the import path under which SPIRE keeps its server plugins, one
// package per <kind>/<name>.
const pluginRoot = "github.com/spiffe/spire/pkg/server/plugin/"

// Kept are the built-in plugins (<kind>/<name> under pluginRoot) that stay: the ones
// testbed/spireserver configures, and the disk ones, which import nothing heavy.
// DataStore sql is not a catalog entry of the files pruned here (catalog.go loads it).
var Kept = map[string]bool{
	"keymanager/memory":           true,
	"keymanager/disk":             true,
	"nodeattestor/jointoken":      true,
	"upstreamauthority/disk":      true,
	"credentialcomposer/uniqueid": true,
}

// Prune returns src (one Go file of the catalog) without the imports of plugins under
// pluginRoot that kept does not name and without the `<pkg>.BuiltIn()` entries of the
// lists that used them, and the plugins it dropped. A dropped package still used in
// another way is an error: the catalog changed shape, and pruning it blindly would
// fail later, in the build.
func Prune(name string, src []byte, kept map[string]bool) ([]byte, []string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	droppedNames, dropped := dropImports(fset, f, kept)
	if len(dropped) == 0 {
		return src, nil, nil
	}
	dropBuiltIns(f, droppedNames)
	if use := firstUse(f, droppedNames); use != "" {
		return nil, nil, fmt.Errorf("%s: %s is still used after its BuiltIn() entry was dropped", name, use)
	}
	var out bytes.Buffer
	if err := format.Node(&out, fset, f); err != nil {
		return nil, nil, err
	}
	return out.Bytes(), dropped, nil
}

// dropImports removes f's imports of plugins not kept; it returns their local names
// and their <kind>/<name>.
func dropImports(fset *token.FileSet, f *ast.File, kept map[string]bool) (map[string]bool, []string) {
	names := map[string]bool{}
	var dropped []string
	for _, spec := range append([]*ast.ImportSpec(nil), f.Imports...) {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil || !strings.HasPrefix(p, pluginRoot) {
			continue
		}
		plugin := strings.TrimPrefix(p, pluginRoot)
		if strings.Count(plugin, "/") != 1 || kept[plugin] {
			continue // a plugin kind's interface package, or a kept plugin
		}
		local := path.Base(p)
		if spec.Name != nil {
			local = spec.Name.Name
		}
		names[local] = true
		dropped = append(dropped, plugin)
		deleteImport(f, spec)
	}
	return names, dropped
}

// deleteImport removes spec from f's import declarations.
func deleteImport(f *ast.File, spec *ast.ImportSpec) {
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.IMPORT {
			continue
		}
		for i, s := range gen.Specs {
			if s == spec {
				gen.Specs = append(gen.Specs[:i], gen.Specs[i+1:]...)
				break
			}
		}
	}
	for i, s := range f.Imports {
		if s == spec {
			f.Imports = append(f.Imports[:i], f.Imports[i+1:]...)
			break
		}
	}
}

// dropBuiltIns removes every `<name>.BuiltIn()` element, name one of names, from the
// composite literals of f.
func dropBuiltIns(f *ast.File, names map[string]bool) {
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		kept := lit.Elts[:0]
		for _, e := range lit.Elts {
			if !isBuiltInOf(e, names) {
				kept = append(kept, e)
			}
		}
		lit.Elts = kept
		return true
	})
}

func isBuiltInOf(e ast.Expr, names map[string]bool) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "BuiltIn" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && names[id.Name]
}

// firstUse is the first remaining `<name>.X` of f with name one of names, or "".
func firstUse(f *ast.File, names map[string]bool) string {
	use := ""
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && use == "" {
			if id, ok := sel.X.(*ast.Ident); ok && names[id.Name] && id.Obj == nil {
				use = id.Name + "." + sel.Sel.Name
			}
		}
		return use == ""
	})
	return use
}

// PruneDir prunes every non-test Go file of dir (a writable copy of SPIRE's
// pkg/server/catalog) in place and returns the plugins dropped, sorted.
func PruneDir(dir string, kept map[string]bool) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var all []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		out, dropped, err := Prune(filepath.Base(file), src, kept)
		if err != nil {
			return nil, err
		}
		if len(dropped) == 0 {
			continue
		}
		if err := os.WriteFile(file, out, 0o644); err != nil {
			return nil, err
		}
		all = append(all, dropped...)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no built-in plugin to leave out: not SPIRE's server catalog", dir)
	}
	sort.Strings(all)
	return all, nil
}
