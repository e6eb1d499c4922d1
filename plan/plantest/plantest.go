// Package plantest writes operator trees for tests: trees whose nodes are test-bed nodes
// (reached over ssh on a loopback port, host key pinned) and whose builder makes the test
// bed's closures (testbed/closures), so `switchyard ssh apply` can run on them without
// nixpkgs.
package plantest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Node is a node of a test tree.
type Node struct {
	Name    string
	Host    string // e.g. 127.0.0.1
	Port    int    // 0: 22
	User    string // "": root
	HostKey string // "ssh-ed25519 AAAA...": pinned; "": known_hosts
	// Image makes the node an Incus node (methods tf-incus...): the local image
	// alias its instance is created from; it then has no ssh settings.
	Image string
	Tags  []string // the node's tags (--on @tag)
	// NoSubstitute writes substituteOnNode = false: the node never fetches from
	// its own caches.
	NoSubstitute bool
}

// Tree is what WriteTree writes.
type Tree struct {
	Group string // default "web"
	// Domains is the group's domains (SPEC 6.9: what a submission may set as domain).
	Domains []string
	Nodes   []Node
	Closure string // the test closure the hello application builds (default "healthy")
	// DNS is the tree's `dns` (tf-incus-operator's records); nil: none.
	DNS map[string]any
	// Groups are more groups, written as given (e.g. one that runs no application).
	Groups map[string]any
	// Methods is the tree's deployment-method: the baked settings of each method, where
	// its anchors (SPEC 6.9: knownHostsFile, stateBackend, dnsServer...) are set.
	Methods map[string]map[string]any
	// Submissions is the tree's `submissions`, written as given; nil: none.
	Submissions map[string]any
}

// Builder is the builder of test trees ({ configuration, plan }: toplevel): the closure
// named by the hello application's `closure` setting, tagged with a hash of the plan
// (listed modules' content included) and the configuration, so that any change of them
// makes a new toplevel. closures is the path of testbed/closures.
func Builder(closures string) string {
	return `# Test tree builder: { configuration, plan }: a test bed closure (see plan/plantest).
{ configuration, plan }:
let
  tag = builtins.substring 0 12
    (builtins.hashString "sha256" (builtins.toJSON plan + builtins.readFile configuration));
  closures = import ` + strconv.Quote(closures) + ` { inherit tag; };
in
closures.${(plan.applications.hello or { }).closure or "healthy"}
`
}

// WriteTree writes a test operator tree into dir (created) and returns dir: a
// deployment.json with applications hello (enabled; settings closure and greeting) and
// mail (disabled), one group of the given nodes over ssh, `system = "builder.nix"`, and
// a module per node (hosts/<node>.nix) and per application (apps/<app>.nix).
func WriteTree(t testing.TB, dir string, spec Tree) string {
	t.Helper()
	if err := Write(dir, spec); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Write writes the tree WriteTree writes, for code outside tests (the benchmark): a
// failure is returned instead of failing a test.
func Write(dir string, spec Tree) error {
	if spec.Group == "" {
		spec.Group = "web"
	}
	if spec.Closure == "" {
		spec.Closure = "healthy"
	}
	files := map[string]string{}
	nodes := map[string]any{}
	for _, n := range spec.Nodes {
		ssh := map[string]any{"host": n.Host}
		if n.Port != 0 {
			ssh["port"] = n.Port
		}
		if n.User != "" {
			ssh["user"] = n.User
		}
		if n.HostKey != "" {
			ssh["hostKey"] = n.HostKey
		}
		node := map[string]any{"modules": []string{"hosts/" + n.Name + ".nix"}, "ssh": ssh}
		if n.Image != "" {
			node = map[string]any{"modules": []string{"hosts/" + n.Name + ".nix"},
				"incus": map[string]any{"image": n.Image, "limits": map[string]any{"cpu": 1, "memory": "1GiB"}}}
		}
		if len(n.Tags) > 0 {
			node["tags"] = n.Tags
		}
		if n.NoSubstitute {
			node["substituteOnNode"] = false
		}
		nodes[n.Name] = node
		files[filepath.Join("hosts", n.Name+".nix")] = "{ ... }: { networking.hostName = \"" + n.Name + "\"; }\n"
	}
	def := map[string]any{
		"domain": "test.example",
		"email":  "ops@test.example",
		"system": "builder.nix",
		"applications": map[string]any{
			"hello": map[string]any{"enable": true, "module": "apps/hello.nix",
				"settings": map[string]any{"closure": spec.Closure, "greeting": "hi"}},
			"mail": map[string]any{"enable": false, "module": "apps/mail.nix", "settings": map[string]any{}},
		},
		"groups": map[string]any{spec.Group: map[string]any{"applications": []string{"hello", "mail"}, "nodes": nodes}},
	}
	if spec.Domains != nil {
		def["groups"].(map[string]any)[spec.Group].(map[string]any)["domains"] = spec.Domains
	}
	if spec.DNS != nil {
		def["dns"] = spec.DNS
	}
	for name, g := range spec.Groups {
		def["groups"].(map[string]any)[name] = g
	}
	if spec.Methods != nil {
		def["deployment-method"] = spec.Methods
	}
	if spec.Submissions != nil {
		def["submissions"] = spec.Submissions
	}
	b, err := json.MarshalIndent(def, "", "  ")
	if err != nil {
		return err
	}
	files["deployment.json"] = string(b) + "\n"
	files["builder.nix"] = Builder(filepath.Join(testbed.RepoRoot(), "testbed", "closures"))
	files[filepath.Join("apps", "hello.nix")] = "{ ... }: { }\n"
	files[filepath.Join("apps", "mail.nix")] = "{ ... }: { }\n"
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// BreakNode makes node's evaluation fail in the tree at dir (written by WriteTree):
// its builder throws "<node> is broken" for that node and builds the others as
// before.
func BreakNode(t testing.TB, dir, node string) {
	t.Helper()
	builder := filepath.Join(dir, "builder.nix")
	if err := os.Rename(builder, filepath.Join(dir, "builder-whole.nix")); err != nil {
		t.Fatal(err)
	}
	broken := "# Test tree builder: node " + strconv.Quote(node) + " does not evaluate (plantest.BreakNode).\n" +
		"args@{ configuration, plan }:\n" +
		"if plan.node == " + strconv.Quote(node) + " then throw " + strconv.Quote(node+" is broken") + " else import ./builder-whole.nix args\n"
	if err := os.WriteFile(builder, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
}
