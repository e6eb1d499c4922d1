package main_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/receipt"
	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 16 with the tf method (SPEC 6.8): a tree that requires signed submissions.
// A signed submission applies, and its receipt, signed with the deployer's key, is
// in the OpenTofu state and on the node; receipts verify passes. An unsigned
// submission and one changed by a byte exit 2 with the reason, and the node keeps
// running what it ran. A node switched by hand after a second apply fails verify,
// naming the node and both toplevels. No receipt key path or key bytes are in the
// state dir (OpenTofu's state included) or the outputs.
func TestTFSignedSubmissionsAndReceipts(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "tf", "healthy", map[string]*testbed.Node{"web1": node})
	alice, alicePub := operatorKey(t, "ed25519")
	requireSignatures(t, tree, "alice@example.com "+alicePub+"\n")
	key, _ := operatorKey(t, "ed25519")
	pub, err := receipt.LoadPublicKey(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	cache := "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()
	signedEnv := func(sub string) []string {
		sig := string(keygen(t, []byte(sub), "-Y", "sign", "-f", alice, "-n", "switchyard-deployment"))
		return []string{"DEPLOYMENT=" + sub, "DEPLOYMENT_SIGNATURE=" + sig, cache, "SWITCHYARD_RECEIPT_KEY=" + key}
	}
	env := signedEnv(deployment)
	var outputs []string
	apply := func(env []string, code int) run {
		t.Helper()
		r := switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
		wantCode(t, r, code)
		outputs = append(outputs, r.stdout, r.stderr)
		return r
	}

	apply(env, 0)
	first := node.Readlink(t, "/run/current-system")
	st := tofuState(t, env, tree)["web1"]
	envelope, _ := st["receipt"].(string)
	o, err := receipt.Open(context.Background(), []byte(envelope), pub)
	if err != nil || o.Toplevel != first || o.Submission.Signer != "alice@example.com" || o.Node != "web1" || len(o.Phases) == 0 {
		t.Fatalf("the state's receipt: %v %+v", err, o)
	}
	onNode := node.MustExec(t, "cat", "/var/lib/switchyard/receipts/"+receipt.FileName(o.Time))
	if onNode != envelope {
		t.Errorf("the node's receipt differs from the state's")
	}
	r := switchyard(t, env, "tf", "receipts", "verify", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	outputs = append(outputs, r.stdout, r.stderr)

	// Refused submissions change nothing.
	next := strings.Replace(deployment, `"sshKeyFile"`, `"applications":{"hello":{"enable":true,"settings":{"greeting":"hey"}}},"sshKeyFile"`, 1)
	nextEnv := signedEnv(next)
	tampered := append([]string{"DEPLOYMENT=" + strings.Replace(next, `"hey"`, `"hex"`, 1)}, nextEnv[1:]...)
	for _, c := range []struct {
		name   string
		env    []string
		reason string
	}{
		{"unsigned", []string{"DEPLOYMENT=" + next, cache}, "deployment signature: unsigned while the tree requires a signature"},
		{"one byte changed", tampered, "deployment signature: signed over other bytes"},
	} {
		r := apply(c.env, 2)
		if !strings.Contains(r.stderr, c.reason) {
			t.Errorf("%s: stderr %q, want %q", c.name, r.stderr, c.reason)
		}
		if p := phaseOrder(r); len(p) != 0 {
			t.Errorf("%s: ran phases %v", c.name, p)
		}
		if got := node.Readlink(t, "/run/current-system"); got != first {
			t.Errorf("%s: the node runs %s, want %s", c.name, got, first)
		}
	}

	// A second signed apply, then back to the first by hand: verify fails.
	apply(nextEnv, 0)
	second := node.Readlink(t, "/run/current-system")
	if second == first {
		t.Fatal("the second submission deployed nothing new")
	}
	node.MustExec(t, first+"/bin/switch-to-configuration", "switch")
	r = switchyard(t, nextEnv, "tf", "receipts", "verify", "--tree", tree)
	wantCode(t, r, 1)
	outputs = append(outputs, r.stdout, r.stderr)
	if !strings.Contains(r.stderr+r.stdout, "web1: receipts: runs "+first+", but its last receipt") || !strings.Contains(r.stderr+r.stdout, "names "+second) {
		t.Errorf("verify after a hand switch: %s %s", r.stdout, r.stderr)
	}
	if n := strings.Count(node.MustExec(t, "ls", "/var/lib/switchyard/receipts"), ".json"); n != 2 {
		t.Errorf("the node keeps %d receipts, want 2", n)
	}
	noSecrets(t, key, filepath.Join(tree, ".switchyard"), outputs...)
	if b, _ := os.ReadFile(filepath.Join(tree, ".switchyard", "tofu", "state", "switchyard.tfstate")); !bytes.Contains(b, []byte(`"receipt"`)) {
		t.Error("the local state has no receipt attribute")
	}
}
