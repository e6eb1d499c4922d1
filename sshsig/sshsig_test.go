package sshsig_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/sshsig"
	"github.com/switchyard-nix/switchyard/testbed"
	"golang.org/x/crypto/ssh"
)

// Interop with OpenSSH's ssh-keygen -Y, both ways (issue 16 item 1).

const ns = "switchyard-deployment"

var message = []byte(`{"deployment-method":{"ssh":{"applications":{"hello":{"enable":true}}}}}`)

type key struct {
	file   string // the private key file; file+".pub" the public key
	signer ssh.Signer
	pub    ssh.PublicKey
	line   string // "keytype base64" as allowed_signers takes it
}

func sshKeygen(t *testing.T, stdin []byte, args ...string) ([]byte, error) {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		testbed.Unavailable(t, "ssh-keygen", "testbed/setup.sh", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh-keygen", args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), errors.New(strings.TrimSpace(errb.String()) + ": " + err.Error())
	}
	return out.Bytes(), nil
}

func newKey(t *testing.T, typ string) key {
	t.Helper()
	file := filepath.Join(t.TempDir(), "id_"+typ)
	args := []string{"-q", "-t", typ, "-N", "", "-C", "test", "-f", file}
	if typ == "rsa" {
		args = append(args, "-b", "2048")
	}
	if _, err := sshKeygen(t, nil, args...); err != nil {
		t.Fatalf("ssh-keygen: %v", err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	pub := signer.PublicKey()
	return key{file: file, signer: signer, pub: pub, line: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub)))}
}

// keygenSign signs message as an operator would: ssh-keygen -Y sign.
func keygenSign(t *testing.T, k key, namespace string, msg []byte) []byte {
	t.Helper()
	sig, err := sshKeygen(t, msg, "-Y", "sign", "-f", k.file, "-n", namespace)
	if err != nil {
		t.Fatalf("ssh-keygen -Y sign: %v", err)
	}
	return sig
}

// keygenVerify is ssh-keygen -Y verify of sig over msg against allowedSigners.
func keygenVerify(t *testing.T, allowedSigners, principal, namespace string, sig, msg []byte) error {
	t.Helper()
	dir := t.TempDir()
	as, sf := filepath.Join(dir, "allowed_signers"), filepath.Join(dir, "sig")
	if err := os.WriteFile(as, []byte(allowedSigners), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sf, sig, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := sshKeygen(t, msg, "-Y", "verify", "-f", as, "-I", principal, "-n", namespace, "-s", sf)
	return err
}

func parse(t *testing.T, s string) []sshsig.Allowed {
	t.Helper()
	a, err := sshsig.ParseAllowedSigners(strings.NewReader(s))
	if err != nil {
		t.Fatalf("ParseAllowedSigners: %v", err)
	}
	return a
}

func flip(b []byte) []byte {
	c := bytes.Clone(b)
	c[len(c)/2] ^= 1
	return c
}

func TestSignedByKeygenVerifiedByUs(t *testing.T) {
	for _, typ := range []string{"ed25519", "rsa"} {
		t.Run(typ, func(t *testing.T) {
			k := newKey(t, typ)
			sig := keygenSign(t, k, ns, message)
			got, err := sshsig.Verify(message, sig, ns)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			allowed := parse(t, "alice@example.com namespaces=\""+ns+"\" "+k.line+" alice\n")
			who, err := sshsig.Find(allowed, got, ns, time.Now())
			if err != nil || who != "alice@example.com" {
				t.Fatalf("Find = %q, %v; want alice@example.com", who, err)
			}
			if _, err := sshsig.Verify(flip(message), sig, ns); !errors.Is(err, sshsig.ErrBadSignature) {
				t.Fatalf("one byte changed: %v, want ErrBadSignature", err)
			}
			other := keygenSign(t, k, "git", message)
			if _, err := sshsig.Verify(message, other, ns); !errors.Is(err, sshsig.ErrNamespace) {
				t.Fatalf("namespace git: %v, want ErrNamespace", err)
			}
		})
	}
}

func TestSignedByUsVerifiedByKeygen(t *testing.T) {
	for _, typ := range []string{"ed25519", "rsa"} {
		t.Run(typ, func(t *testing.T) {
			k := newKey(t, typ)
			sig, err := sshsig.Sign(message, k.signer, ns)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(sig, []byte("-----BEGIN SSH SIGNATURE-----\n")) {
				t.Fatalf("not armored: %q", sig)
			}
			allowed := "alice@example.com " + k.line + "\n"
			if err := keygenVerify(t, allowed, "alice@example.com", ns, sig, message); err != nil {
				t.Fatalf("ssh-keygen -Y verify: %v", err)
			}
			if err := keygenVerify(t, allowed, "alice@example.com", ns, sig, flip(message)); err == nil {
				t.Fatal("ssh-keygen verified a message with one byte changed")
			}
			if err := keygenVerify(t, allowed, "alice@example.com", "git", sig, message); err == nil {
				t.Fatal("ssh-keygen verified in namespace git")
			}
			expired := `alice@example.com valid-before="20200101Z" ` + k.line + "\n"
			if err := keygenVerify(t, expired, "alice@example.com", ns, sig, message); err == nil {
				t.Fatal("ssh-keygen verified against an expired line")
			}
			// The same lines, read by us.
			if _, err := sshsig.Find(parse(t, expired), k.pub, ns, time.Now()); !errors.Is(err, sshsig.ErrExpired) {
				t.Fatalf("Find, expired line: %v, want ErrExpired", err)
			}
			if _, err := sshsig.Verify(message, sig, ns); err != nil {
				t.Fatalf("our own Verify: %v", err)
			}
		})
	}
}

func TestFind(t *testing.T) {
	alice, bob := newKeyNoTool(t), newKeyNoTool(t)
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	file := "# operators\n\n" +
		`"alice@example.com,ops-*" namespaces="git,switchyard-*",valid-after="20260101Z",valid-before="202701011200Z" ` + alice + " alice\n" +
		`bob@example.com namespaces="git" ` + bob + "\n"
	allowed := parse(t, file)
	if len(allowed) != 2 {
		t.Fatalf("%d lines, want 2", len(allowed))
	}
	a := allowed[0]
	if got := strings.Join(a.Principals, " "); got != "alice@example.com ops-*" {
		t.Fatalf("principals %q", got)
	}
	if !a.ValidAfter.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) || !a.ValidBefore.Equal(time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("validity %v .. %v", a.ValidAfter, a.ValidBefore)
	}
	if who, err := sshsig.Find(allowed, a.Key, ns, now); err != nil || who != "alice@example.com,ops-*" {
		t.Fatalf("Find alice = %q, %v", who, err)
	}
	cases := []struct {
		name string
		key  ssh.PublicKey
		ns   string
		at   time.Time
		want error
	}{
		{"expired", a.Key, ns, time.Date(2027, 1, 1, 12, 0, 1, 0, time.UTC), sshsig.ErrExpired},
		{"not yet valid", a.Key, ns, time.Date(2025, 12, 31, 23, 59, 59, 0, time.UTC), sshsig.ErrNotYetValid},
		{"namespace not allowed", allowed[1].Key, ns, now, sshsig.ErrNamespaceNotAllowed},
		{"namespace pattern not matching", a.Key, "file", now, sshsig.ErrNamespaceNotAllowed},
		{"key on no line", mustKey(t, newKeyNoTool(t)), ns, now, sshsig.ErrNotAllowed},
	}
	for _, c := range cases {
		if _, err := sshsig.Find(allowed, c.key, c.ns, c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := sshsig.Find(allowed, mustKey(t, newKeyNoTool(t)), ns, now); err == nil || !strings.Contains(err.Error(), "SHA256:") {
		t.Errorf("no line: %v, want the key's fingerprint", err)
	}
}

func TestParseAllowedSignersRefuses(t *testing.T) {
	k := newKeyNoTool(t)
	for name, line := range map[string]string{
		"no key":              "alice@example.com",
		"garbage key":         "alice@example.com ssh-ed25519 AAAAnotbase64!!",
		"unknown option":      "alice@example.com no-touch-required " + k,
		"unquoted namespaces": "alice@example.com namespaces=git " + k,
		"bad time":            `alice@example.com valid-before="2026-01-01" ` + k,
		"open quote":          `"alice@example.com ` + k,
		"empty principal":     "alice@example.com,, " + k,
		"before not after":    `a valid-after="20260101",valid-before="20250101" ` + k,
	} {
		if _, err := sshsig.ParseAllowedSigners(strings.NewReader("# c\n" + line + "\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%s: %v, want a refusal naming line 2", name, err)
		}
	}
	// cert-authority lines are read but never allow a plain key.
	allowed := parse(t, "*@example.com cert-authority "+k+"\n")
	if !allowed[0].CertAuthority {
		t.Fatal("cert-authority not read")
	}
	if _, err := sshsig.Find(allowed, mustKey(t, k), ns, time.Now()); !errors.Is(err, sshsig.ErrNotAllowed) {
		t.Fatalf("cert-authority line matched a plain key: %v", err)
	}
}

func TestVerifyRefusesMalformed(t *testing.T) {
	for _, sig := range []string{"", "not a signature", "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n"} {
		if _, err := sshsig.Verify(message, []byte(sig), ns); !errors.Is(err, sshsig.ErrMalformed) {
			t.Errorf("%q: %v, want ErrMalformed", sig, err)
		}
	}
}

// newKeyNoTool is a fresh ed25519 public key in allowed_signers form, made in Go.
func newKeyNoTool(t *testing.T) string {
	t.Helper()
	s, err := newEd25519Signer()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
}

func mustKey(t *testing.T, line string) ssh.PublicKey {
	t.Helper()
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
