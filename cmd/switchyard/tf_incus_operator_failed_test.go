package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed/dnsserver"
)

// Issue 31 item 1 (and item 4 first): a failed deploy is never reported from an older verdict. After a
// healthy tf-incus-operator apply, the tree moves every node to a closure whose switch
// never activates. OpenTofu skips each node's switchyard_verdict (its deployment
// failed), so the state still holds the healthy pass; the apply must report the
// deploy's own verdict (never-confirmed, not ok, exit 1), not that pass's.
func TestTFIncusOperatorFailedDeployNotOldVerdict(t *testing.T) {
	t.Parallel()
	b := newOperatorBed(t, dnsserver.Kinds()[0])
	op := func(args ...string) run {
		t.Helper()
		return switchyard(t, b.env, append([]string{"tf-incus-operator"}, args...)...)
	}
	r := op("apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	tokens := b.wantIdentities(t)

	// Issue 31 item 4: an in-place change of every instance (limits.memory) keeps
	// each node's agent (its token), its entries and its deployment.
	entries := b.entries(t)
	setTreeMemory(t, b.tree, "2GiB")
	r = op("apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	for i, node := range []string{"web1", "web2"} {
		if got, _ := incusCLI(t, "config", "get", "--project", b.project, node, "limits.memory"); got != "2GiB" {
			t.Errorf("%s: limits.memory %q after the change, want 2GiB", node, got)
		}
		if tok, _ := incusOutput(t, "exec", "--project", b.project, node, "--", "cat", "/var/lib/switchyard/spire/join-token"); tok != tokens[i] {
			t.Errorf("%s: the join token changed with an in-place instance change", node)
		}
		for _, res := range []string{"switchyard_spire_agent", "switchyard_deployment", "switchyard_incus_instance"} {
			if n := countLogs(r, node, res+`.node["`+node+`"]: Destroying`) + countLogs(r, node, res+`.node["`+node+`"]: Creating`); n != 0 {
				t.Errorf("%s: %s replaced by an in-place instance change: %q", node, res, logMsgs(r))
			}
		}
	}
	if got := b.entries(t); len(got) != len(entries) {
		t.Errorf("entries after the in-place change: %d, had %d", len(got), len(entries))
	}

	setTreeClosure(t, b.tree, "never-activates")
	r = op("apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 1)
	for _, node := range []string{"web1", "web2"} {
		v := verdicts(t, r)[node]
		if v == nil || v["ok"] != false || v["switch"].(map[string]any)["result"] != "never-confirmed" {
			t.Errorf("%s: verdict %v, want not ok, switch never-confirmed\n%s", node, v, strings.Join(logMsgs(r), "\n"))
		}
	}

	// Issue 31 item 5: a CNAME at a node's name (which holds its addresses) is
	// refused before anything runs: the server would ignore one or the other.
	updates := b.dns.Updates(t)
	writeOperatorTree(t, b, map[string]any{"records": map[string]any{"web1": map[string]any{"CNAME": []string{"front"}}}})
	r = op("apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "web1.CNAME") || !strings.Contains(r.stderr, "a CNAME is a name's only record") {
		t.Errorf("a CNAME at web1: %q, want the field and why", r.stderr)
	}
	if n := b.dns.Updates(t); n != updates {
		t.Errorf("the refused run sent %d DNS updates", n-updates)
	}
}

// setTreeMemory sets every Incus node's limits.memory in the tree's
// deployment.json (plantest writes 1GiB).
func setTreeMemory(t *testing.T, tree, memory string) {
	t.Helper()
	p := filepath.Join(tree, "deployment.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.ReplaceAll(string(b), `"memory": "1GiB"`, `"memory": "`+memory+`"`)
	if changed == string(b) {
		t.Fatalf("no node of the tree has limits.memory 1GiB:\n%s", b)
	}
	if err := os.WriteFile(p, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
}
