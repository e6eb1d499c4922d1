package main_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// inputBuilder is a test tree builder whose toplevel depends on what the node's modules
// evaluate to (their `motd`), as a NixOS toplevel depends on every file its modules
// read: so a file a module reads without naming it by a path literal changes the
// toplevel, as it would on NixOS.
func inputBuilder() string {
	closures := filepath.Join(testbed.RepoRoot(), "testbed", "closures")
	return `{ configuration, plan }:
let
  read = map (m: (import m { }).motd or "") plan.modules;
  tag = builtins.substring 0 12 (builtins.hashString "sha256"
    (builtins.toJSON plan + builtins.readFile configuration + builtins.toJSON read));
in
(import ` + strconv.Quote(closures) + ` { inherit tag; }).healthy
`
}

// Issue 11 item 10, end to end over the ssh method with the eval cache on: a node's
// module imports a file through a variable (`./${name}.nix`, which no path literal
// names). Changing that file makes `plan` say changed and `apply` redeploy the node.
func TestSSHRedeploysOnUnnamedInput(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "ssh", "healthy", map[string]*testbed.Node{"web1": node})
	write := func(rel, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tree, rel), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("builder.nix", inputBuilder())
	write("hosts/web1.nix", "{ ... }: let name = \"motd\"; in { networking.hostName = \"web1\"; motd = import ./${name}.nix; }\n")
	write("hosts/motd.nix", `"first"`+"\n")
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}

	r := switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	first := node.Readlink(t, "/run/current-system")
	if first == "" {
		t.Fatalf("the first apply deployed nothing: %q", logMsgs(r))
	}

	write("hosts/motd.nix", `"second"`+"\n")
	r = switchyard(t, env, "ssh", "plan", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	var planned map[string]any
	for _, e := range r.events {
		if e["kind"] == "plan" && e["node"] == "web1" {
			planned = e
		}
	}
	if planned == nil || planned["changed"] != true {
		t.Errorf("plan after changing hosts/motd.nix: %v, want changed: %q", planned, logMsgs(r))
	}

	r = switchyard(t, env, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	v := verdicts(t, r)["web1"]
	if v == nil || v["switch"].(map[string]any)["result"] != "ok" {
		t.Errorf("apply after changing hosts/motd.nix: verdict %v, want a switch: %q", v, logMsgs(r))
	}
	if got := node.Readlink(t, "/run/current-system"); got == first {
		t.Errorf("the node still runs %s", got)
	}
}
