package main_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// keygen runs ssh-keygen with stdin and returns its stdout.
func keygen(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh-keygen", args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("ssh-keygen %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.Bytes()
}

// operatorKey makes an operator's signing key with ssh-keygen and returns the private
// key file and the public key as allowed_signers takes it.
func operatorKey(t *testing.T, typ string) (file, pub string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "id_"+typ)
	keygen(t, nil, "-q", "-t", typ, "-N", "", "-C", "operator", "-f", file)
	b, err := os.ReadFile(file + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	return file, f[0] + " " + f[1]
}

// requireSignatures makes the tree require signed submissions, signers as given.
func requireSignatures(t *testing.T, tree, allowedSigners string) {
	t.Helper()
	path := filepath.Join(tree, "deployment.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(b, &def); err != nil {
		t.Fatal(err)
	}
	def["submissions"] = map[string]any{"allowedSigners": "keys/allowed_signers", "requireSignature": true}
	if b, err = json.MarshalIndent(def, "", "  "); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(tree, "keys"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "keys", "allowed_signers"), []byte(allowedSigners), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Issue 16 item 1 (SPEC 6.8): a tree that requires signed submissions. A submission
// signed with ssh-keygen by an allowed operator applies; the same with one byte
// changed, signed by a key no line allows, signed by a key whose line has expired,
// signed in another namespace, and unsigned: each exits 2 before anything is
// evaluated, naming its reason, and the node keeps running what it ran.
func TestSSHSignedSubmissions(t *testing.T) {
	bed := testbed.Require(t)
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		testbed.Unavailable(t, "ssh-keygen", "testbed/setup.sh", err)
	}
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "ssh", "healthy", map[string]*testbed.Node{"web1": node})
	alice, alicePub := operatorKey(t, "ed25519")
	old, oldPub := operatorKey(t, "rsa")
	mallory, _ := operatorKey(t, "ed25519")
	requireSignatures(t, tree, "# who may submit\n"+
		`alice@example.com namespaces="switchyard-deployment" `+alicePub+" alice\n"+
		`old@example.com valid-before="20200101Z" `+oldPub+"\n")
	cache := "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()
	dir := t.TempDir()
	sign := func(key, ns string, sub []byte) string {
		return string(keygen(t, sub, "-Y", "sign", "-f", key, "-n", ns))
	}
	file := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Signed by alice: applies, and says who signed (no key material).
	sub := []byte(deployment)
	r := switchyard(t, []string{"DEPLOYMENT_SIGNATURE=" + sign(alice, "switchyard-deployment", sub), cache},
		"ssh", "apply", "--tree", tree, "--deployment", file("sub.json", sub), "--output", "json")
	wantCode(t, r, 0)
	if !strings.Contains(strings.Join(logMsgs(r), "\n"), "deployment signed by alice@example.com (submission sha256 ") {
		t.Errorf("no signer in the logs: %q", logMsgs(r))
	}
	for _, secret := range []string{strings.Fields(alicePub)[1], alice} {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("the output names the signing key (%.20s...)", secret)
		}
	}
	running := node.Readlink(t, "/run/current-system")
	if running == "" {
		t.Fatal("the signed apply switched nothing")
	}

	// The signer and the submission's hash are the plan's provenance (plan --out),
	// without key material.
	saved := filepath.Join(dir, "plan.json")
	r = switchyard(t, []string{"DEPLOYMENT_SIGNATURE=" + sign(alice, "switchyard-deployment", sub), cache},
		"ssh", "plan", "--tree", tree, "--deployment", file("sub.json", sub), "--out", saved, "--output", "json")
	wantCode(t, r, 0)
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	var planned struct {
		Provenance struct {
			SubmissionSHA256 string `json:"submission_sha256"`
			Signer           string `json:"signer"`
		} `json:"provenance"`
	}
	if err := json.Unmarshal(b, &planned); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(sub); planned.Provenance.Signer != "alice@example.com" || planned.Provenance.SubmissionSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("the saved plan's provenance: %+v", planned.Provenance)
	}
	for _, secret := range []string{strings.Fields(alicePub)[1], alice} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the saved plan names the signing key (%.20s...)", secret)
		}
	}

	// Another submission: it would deploy a new toplevel if it were let through.
	next := []byte(strings.Replace(deployment, `"sshKeyFile"`, `"applications":{"hello":{"enable":true,"settings":{"greeting":"hey"}}},"sshKeyFile"`, 1))
	changed := bytes.Replace(next, []byte(`"hey"`), []byte(`"hex"`), 1)
	for _, c := range []struct {
		name      string
		sub       []byte
		signature string // "": unsigned
		reason    string
	}{
		{"one byte changed", changed, sign(alice, "switchyard-deployment", next), "deployment signature: signed over other bytes"},
		{"a signer not allowed", next, sign(mallory, "switchyard-deployment", next), "deployment signature: no allowed signer for key SHA256:"},
		{"an expired signer", next, sign(old, "switchyard-deployment", next), "deployment signature: expired"},
		{"another namespace", next, sign(alice, "git", next), `deployment signature: namespace: signed in another namespace: "git"`},
		{"unsigned", next, "", "deployment signature: unsigned while the tree requires a signature"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"ssh", "apply", "--tree", tree, "--deployment", file("sub.json", c.sub), "--output", "json"}
			if c.signature != "" {
				args = append(args, "--deployment-signature", file("sub.json.sig", []byte(c.signature)))
			}
			r := switchyard(t, []string{cache}, args...)
			wantCode(t, r, 2)
			if !strings.Contains(r.stderr, c.reason) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("stderr %q, want one line with %q", r.stderr, c.reason)
			}
			if p := phaseOrder(r); len(p) != 0 {
				t.Errorf("the refused submission ran phases %v", p)
			}
			if got := node.Readlink(t, "/run/current-system"); got != running {
				t.Errorf("the refused submission changed the node: %s, want %s", got, running)
			}
		})
	}
	// The refused submission, signed by alice, applies: what was refused would have
	// changed the node.
	r = switchyard(t, []string{cache}, "ssh", "apply", "--tree", tree, "--deployment", file("sub.json", next),
		"--deployment-signature", file("sub.json.sig", []byte(sign(alice, "switchyard-deployment", next))), "--output", "json")
	wantCode(t, r, 0)
	if got := node.Readlink(t, "/run/current-system"); got == running || got == "" {
		t.Errorf("the signed second submission left the node on %s", got)
	}
}
