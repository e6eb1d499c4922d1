package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// boundTree is a tree of two groups, web (web1) and db (db1), over the method, whose
// submissions must be signed, alice's scoped to web only (SPEC 6.9).
func boundTree(t *testing.T, method string, web, db *testbed.Node, alicePub string, baked map[string]any) string {
	t.Helper()
	spec := plantest.Tree{
		Nodes: []plantest.Node{{Name: "web1", Host: "127.0.0.1", Port: web.SSHPort, HostKey: web.HostKey}},
		Groups: map[string]any{"db": map[string]any{"applications": []string{"hello"}, "nodes": map[string]any{
			"db1": map[string]any{"ssh": map[string]any{"host": "127.0.0.1", "port": db.SSHPort, "hostKey": db.HostKey}}}}},
		Submissions: map[string]any{"allowedSigners": "keys/allowed_signers", "requireSignature": true,
			"scopes": map[string]any{"alice@example.com": []string{"web"}}},
	}
	if baked != nil {
		spec.Methods = map[string]map[string]any{method: baked}
	}
	tree := plantest.WriteTree(t, t.TempDir(), spec)
	os.MkdirAll(filepath.Join(tree, "keys"), 0o755)
	if err := os.WriteFile(filepath.Join(tree, "keys", "allowed_signers"), []byte("alice@example.com "+alicePub+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return tree
}

// testSignedBound is issue 29 item 4 over a method: a signed submission applies only
// to the groups its signer is scoped to (exit 2 naming the principal and the group,
// nothing changed), and one superseded on a group is refused there (exit 2, nothing
// changed) unless --allow-older is given.
func testSignedBound(t *testing.T, method string, baked map[string]any, extra ...string) {
	bed := testbed.Require(t)
	web, db := bed.Node(t), bed.Node(t)
	alice, alicePub := operatorKey(t, "ed25519")
	tree := boundTree(t, method, web, db, alicePub, baked)
	dir := t.TempDir()
	env := append([]string{"DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}, extra...)
	submission := func(greeting string) (string, string) {
		sub := fmt.Sprintf(`{"deployment-method":{%q:{"sshKeyFile":%q,"applications":{"hello":{"enable":true,"settings":{"greeting":%q}}}}}}`, method, web.KeyFile, greeting)
		file := filepath.Join(dir, greeting+".json")
		os.WriteFile(file, []byte(sub), 0o600)
		return file, string(keygen(t, []byte(sub), "-Y", "sign", "-f", alice, "-n", "switchyard-deployment"))
	}
	apply := func(file, sig string, args ...string) run {
		t.Helper()
		return switchyard(t, append([]string{"DEPLOYMENT_SIGNATURE=" + sig}, env...),
			append([]string{method, "apply", "--tree", tree, "--deployment", file, "--output", "json"}, args...)...)
	}
	refused := func(r run, want, running string) {
		t.Helper()
		wantCode(t, r, 2)
		if !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("stderr %q, want one line with %q", r.stderr, want)
		}
		if p := phaseOrder(r); len(p) != 0 {
			t.Errorf("the refused run ran phases %v", p)
		}
		if got := web.Readlink(t, "/run/current-system"); got != running {
			t.Errorf("the refused run changed web1: %s, want %s", got, running)
		}
		if got := db.Readlink(t, "/run/current-system"); got != "" {
			t.Errorf("the refused run deployed db1: %s", got)
		}
	}

	hi, hiSig := submission("hi")
	refused(apply(hi, hiSig, "--group", "db"), "deployment signature: alice@example.com may not submit for group db (submissions.scopes)", "")
	refused(apply(hi, hiSig), "alice@example.com may not submit for group db", "")
	r := apply(hi, hiSig, "--group", "web")
	wantCode(t, r, 0)
	first := web.Readlink(t, "/run/current-system")
	hey, heySig := submission("hey")
	r = apply(hey, heySig, "--group", "web")
	wantCode(t, r, 0)
	second := web.Readlink(t, "/run/current-system")
	if second == first || first == "" {
		t.Fatalf("the second submission did not change web1: %s then %s", first, second)
	}
	// The captured first submission, replayed: it would roll web1 back.
	refused(apply(hi, hiSig, "--group", "web"), "was applied to group web before and has since been superseded by 1 other", second)
	// The current one applies again; an operator rolls back with --allow-older.
	wantCode(t, apply(hey, heySig, "--group", "web"), 0)
	r = apply(hi, hiSig, "--group", "web", "--allow-older")
	wantCode(t, r, 0)
	if got := web.Readlink(t, "/run/current-system"); got != first {
		t.Errorf("--allow-older left web1 on %s, want %s", got, first)
	}
}

func TestSSHSignedSubmissionBound(t *testing.T) {
	t.Parallel()
	testSignedBound(t, "ssh", nil)
}

// The tf method keeps the applied submissions in OpenTofu's state.
func TestTFSignedSubmissionBound(t *testing.T) {
	needTofu(t)
	t.Parallel()
	testSignedBound(t, "tf", nil)
}
