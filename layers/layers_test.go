package layers

import (
	"bytes"
	"context"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

const module = "github.com/switchyard-nix/switchyard"

// rule is one line of the layering: packages matching from must not depend (even
// through others) on any module package matching a forbidden prefix; with only
// set, they may depend on nothing of the module but those.
type rule struct {
	from   func(pkg string) bool
	forbid []string // package path prefixes, relative to the module
	only   []string // exact packages, relative to the module; nil: no such limit
	why    string
}

// under matches a package and its subpackages.
func under(dir string) func(string) bool {
	return func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }
}

// within matches a dependency on a package or its subpackages.
func within(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// rules are the layering of issue 13: the body below the transports and the plan,
// the verdict below the body, the command line above everything.
var rules = []rule{
	{from: under("effects"), forbid: []string{"plan", "transports", "methods", "provider", "tofu", "cmd"},
		why: "the body sees a node only through effects.Transport and a plan only through what its caller hands it"},
	{from: under("transports"), forbid: []string{"methods", "plan", "provider", "tofu", "cmd"},
		why: "a transport reaches a node; it knows nothing of methods, plans or the command line"},
	{from: under("verdict"), only: []string{"exitcode"},
		why: "classification is pure: it uses the shared exit codes and nothing else of ours"},
	{from: under("exitcode"), only: []string{},
		why: "the exit codes are the bottom layer"},
	{from: under("pool"), only: []string{},
		why: "the worker pool is the bottom layer"},
	{from: under("localcmd"), only: []string{},
		why: "running a local command is the bottom layer"},
	{from: func(p string) bool { return !under("cmd")(p) }, forbid: []string{"cmd"},
		why: "nothing below the command line imports it"},
	// The upper floors (issue 33 item 5).
	{from: func(p string) bool { return under("plan")(p) && p != "plan/plantest" },
		forbid: []string{"effects", "transports", "verdict", "methods", "provider", "tofu", "testbed"},
		why:    "a plan says what to deploy: it reaches no node, runs no body and drives no OpenTofu"},
	{from: under("provider/contract"), only: []string{},
		why: "the contract between the CLI and the provider is data both sides import; it imports nothing of theirs"},
	{from: under("provider"), forbid: []string{"methods", "plan", "tofu", "testbed"},
		why: "the provider is OpenTofu's side of the boundary: it knows the run contract, not the CLI's methods, trees or tofu driving"},
	{from: under("tofu"), forbid: []string{"methods", "plan", "testbed"},
		why: "driving OpenTofu knows the provider's contract and OpenTofu, not the methods or trees that use it"},
	{from: under("methods"), forbid: []string{"testbed"},
		why: "the methods ship in the binary"},
	{from: func(p string) bool {
		return !under("testbed")(p) && p != "bench" && !strings.HasSuffix(p, "test")
	}, forbid: []string{"testbed"},
		why: "the test bed is for tests and the bench (and their helpers, *test packages), never in the binary"},
}

// violations lists, for the dependency graph deps (package -> every package it
// depends on, paths relative to the module), each rule a package breaks.
func violations(deps map[string][]string) []string {
	var out []string
	for _, pkg := range slices.Sorted(maps.Keys(deps)) {
		for _, r := range rules {
			if !r.from(pkg) {
				continue
			}
			for _, d := range deps[pkg] {
				bad := slices.ContainsFunc(r.forbid, func(f string) bool { return within(d, f) })
				if r.only != nil && !slices.Contains(r.only, d) {
					bad = true
				}
				if bad {
					out = append(out, pkg+" depends on "+d+": "+r.why)
				}
			}
		}
	}
	return out
}

// graph is the module's dependency graph from `go list` (non-test files, every
// build constraint of this platform): each package and the module packages it
// depends on, directly or not, relative to the module.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "list", "-f", "{{.ImportPath}}\t{{join .Deps \" \"}}", module+"/...")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		pkg, all, _ := strings.Cut(line, "\t")
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			continue
		}
		deps[rel] = nil
		for _, d := range strings.Fields(all) {
			if r, ok := strings.CutPrefix(d, module+"/"); ok {
				deps[rel] = append(deps[rel], r)
			}
		}
	}
	return deps
}

// Issue 13: no import runs from a lower layer to a higher one (like tailscale's
// depaware/deptest). Runs without the test bed.
func TestLayering(t *testing.T) {
	deps := graph(t)
	for _, want := range []string{"effects", "verdict", "transports", "transports/ssh", "exitcode", "pool", "cmd/switchyard"} {
		if _, ok := deps[want]; !ok {
			t.Fatalf("go list did not list %s: the graph is not the module's", want)
		}
	}
	for _, v := range violations(deps) {
		t.Error(v)
	}
}

// The rules catch what they are for: a graph that breaks each one is reported.
func TestLayeringRulesBite(t *testing.T) {
	bad := map[string][]string{
		"effects":          {"exitcode", "transports/node"},
		"effects/x":        {"plan/merge"},
		"transports/ssh":   {"methods"},
		"transports/incus": {"cmd/switchyard/cli"},
		"verdict":          {"exitcode", "effects"},
		"exitcode":         {"pool"},
		"plan":             {"cmd/switchyard"},
		"methods":          {"effects", "transports", "plan"}, // allowed
		"plan/merge":       {"plan/data", "effects"},
		"plan/plantest":    {"testbed"}, // allowed: a test helper
		"provider":         {"effects", "tofu"},
		"tofu":             {"provider", "methods"},
		"receipt":          {"testbed"},
		"bench":            {"testbed", "methods"}, // allowed
	}
	got := violations(bad)
	for _, want := range []string{
		"effects depends on transports/node", "effects/x depends on plan/merge", "transports/ssh depends on methods",
		"transports/incus depends on cmd/switchyard/cli", "verdict depends on effects", "exitcode depends on pool",
		"plan depends on cmd/switchyard", "plan/merge depends on effects", "provider depends on tofu",
		"tofu depends on methods", "receipt depends on testbed",
	} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, want+":") }) {
			t.Errorf("not reported: %s (got %q)", want, got)
		}
	}
	for _, s := range got {
		if strings.HasPrefix(s, "methods ") || strings.HasPrefix(s, "verdict depends on exitcode") ||
			strings.HasPrefix(s, "effects depends on exitcode") || strings.HasPrefix(s, "plan/plantest ") ||
			strings.HasPrefix(s, "bench ") || strings.HasPrefix(s, "provider depends on effects") ||
			strings.HasPrefix(s, "tofu depends on provider") || strings.HasPrefix(s, "plan/merge depends on plan/data") {
			t.Errorf("reported though allowed: %s", s)
		}
	}
}

// importRule forbids the packages matching from to import a package outside the
// module directly: what they may reach only through one of ours.
type importRule struct {
	from   func(pkg string) bool
	forbid string // an import path, and its subpackages
	why    string
}

var importRules = []importRule{
	{from: under("methods"), forbid: "github.com/hashicorp/terraform-exec",
		why: "the methods drive OpenTofu through tofu.Session (issue 33 item 1): its verbs and their options live there"},
}

// importViolations lists, for the direct imports of each package (paths relative
// to the module for ours), each import rule a package breaks.
func importViolations(imports map[string][]string) []string {
	var out []string
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		for _, r := range importRules {
			if !r.from(pkg) {
				continue
			}
			for _, imp := range imports[pkg] {
				if within(imp, r.forbid) {
					out = append(out, pkg+" imports "+imp+": "+r.why)
				}
			}
		}
	}
	return out
}

// The methods import no terraform-exec: OpenTofu's driving is tofu's.
func TestImports(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", module+"/...")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		pkg, all, _ := strings.Cut(line, "\t")
		if rel, ok := strings.CutPrefix(pkg, module+"/"); ok {
			imports[rel] = strings.Fields(all)
		}
	}
	if _, ok := imports["methods"]; !ok {
		t.Fatal("go list did not list methods")
	}
	for _, v := range importViolations(imports) {
		t.Error(v)
	}
	bad := importViolations(map[string][]string{"methods": {"github.com/hashicorp/terraform-exec/tfexec"}, "tofu": {"github.com/hashicorp/terraform-exec/tfexec"}})
	if len(bad) != 1 || !strings.HasPrefix(bad[0], "methods imports github.com/hashicorp/terraform-exec/tfexec:") {
		t.Errorf("the import rule does not bite as it should: %q", bad)
	}
}
