package methods

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/sshsig"
)

func testSigner(t *testing.T) (ssh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

// signedTree is a tree whose definition has the given submissions and allowed_signers.
func signedTree(t *testing.T, submissions, allowedSigners string) *definition.Definition {
	t.Helper()
	dir := t.TempDir()
	def := `{"submissions": ` + submissions + `}`
	if submissions == "" {
		def = `{}`
	}
	if err := os.WriteFile(filepath.Join(dir, "deployment.json"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "allowed_signers"), []byte(allowedSigners), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := definition.Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The signature check of SPEC 6.8: each failure refuses (exit 2) naming its reason
// (issue 16 item 1).
func TestCheckSignature(t *testing.T) {
	alice, aliceLine := testSigner(t)
	mallory, _ := testSigner(t)
	sub := []byte(`{"deployment-method":{"ssh":{}}}`)
	sign := func(s ssh.Signer, ns string, msg []byte) []byte {
		b, err := sshsig.Sign(msg, s, ns)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := sign(alice, SignatureNamespace, sub)
	required := `{"allowedSigners": "allowed_signers", "requireSignature": true}`
	signers := "alice@example.com " + aliceLine + "\n"
	now := time.Now()

	d := signedTree(t, required, signers)
	s, err := checkSignature(d, sub, good, now)
	if err != nil || s.Principal != "alice@example.com" || len(s.SubmissionSHA256) != 64 {
		t.Fatalf("a good signature: %+v, %v", s, err)
	}
	if s, err := checkSignature(signedTree(t, "", ""), sub, nil, now); err != nil || s.Principal != "" {
		t.Fatalf("unsigned, not required: %+v, %v", s, err)
	}
	for _, c := range []struct {
		name     string
		d        *definition.Definition
		sub, sig []byte
		reason   string
	}{
		{"unsigned while required", d, sub, nil, "unsigned while the tree requires a signature"},
		{"one byte changed", d, []byte(strings.Replace(string(sub), "ssh", "ssi", 1)), good, "signed over other bytes"},
		{"another namespace", d, sub, sign(alice, "git", sub), `namespace: signed in another namespace: "git"`},
		{"a signer not allowed", d, sub, sign(mallory, SignatureNamespace, sub), "no allowed signer for key SHA256:"},
		{"expired", signedTree(t, required, `alice@example.com valid-before="20200101Z" `+aliceLine+"\n"), sub, good, "expired"},
		{"namespace not on the line", signedTree(t, required, `alice@example.com namespaces="git" `+aliceLine+"\n"), sub, good, "namespace: namespace not allowed"},
		{"malformed", d, sub, []byte("garbage"), "not an SSH signature"},
		{"signed, no allowedSigners", signedTree(t, "", ""), sub, good, "the tree names no allowedSigners"},
		{"a bad allowed_signers", signedTree(t, required, "alice@example.com\n"), sub, good, "allowed signers line 1"},
	} {
		_, err := checkSignature(c.d, c.sub, c.sig, now)
		t.Logf("%s: %v", c.name, err)
		if !errors.Is(err, ErrRefused) || exitFor(err) != ExitRefused || !strings.HasPrefix(err.Error(), "deployment signature: ") || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: %v, want a refusal with %q", c.name, err, c.reason)
		}
		if err != nil && (strings.Contains(err.Error(), "AAAA") || strings.Contains(err.Error(), "\n")) {
			t.Errorf("%s: %q names key material or spans lines", c.name, err)
		}
	}
}
