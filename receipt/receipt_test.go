package receipt

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHexSHA256(t *testing.T) {
	const want = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for _, in := range []string{
		"sha256:0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c73", // nix-store --query --hash
		"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",         // nix path-info --json (SRI)
		"sha256:" + want,
	} {
		got, err := HexSHA256(in)
		if err != nil || got != want {
			t.Errorf("HexSHA256(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"md5:abc", "sha256:0mdqa9w1p6cmli6976v4wi0sw9r4p5prkj7lzfd1877wk11c9c7e", "sha256:zz"} {
		if _, err := HexSHA256(bad); err == nil {
			t.Errorf("HexSHA256(%q) took it", bad)
		}
	}
}

// sshKey makes an ed25519 key with ssh-keygen, as an operator would.
func sshKey(t *testing.T, typ string) string {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("no ssh-keygen")
	}
	file := filepath.Join(t.TempDir(), "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", typ, "-N", "", "-f", file).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	return file
}

func predicate() Predicate {
	return Predicate{Node: "web1", Tree: strings.Repeat("a", 64), Submission: Submission{SHA256: strings.Repeat("b", 64), Signer: "alice@example.com"},
		PlanJSON: strings.Repeat("c", 64), NixosConf: strings.Repeat("d", 64), Drv: "/nix/store/x-nixos-system.drv",
		Toplevel: "/nix/store/y-nixos-system", Previous: "/nix/store/z-nixos-system",
		Phases:  []Phase{{Name: "switch", State: "done", Seconds: 1.5}},
		Verdict: json.RawMessage(`{"node":"web1","ok":true}`), Time: time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)}
}

func TestSealOpen(t *testing.T) {
	ctx := context.Background()
	file := sshKey(t, "ed25519")
	key, err := LoadKey(file)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(file + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	env, err := Seal(ctx, predicate(), strings.Repeat("e", 64), key)
	if err != nil {
		t.Fatal(err)
	}
	o, err := Open(ctx, env, pub)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if o.Toplevel != "/nix/store/y-nixos-system" || o.Submission.Signer != "alice@example.com" || o.NARSHA256 != strings.Repeat("e", 64) ||
		!o.Signed || len(o.Phases) != 1 || o.Phases[0].Seconds != 1.5 {
		t.Errorf("opened %+v", o)
	}
	// keyid is the SSH fingerprint, as ssh-keygen -l prints it.
	fp, _ := exec.Command("ssh-keygen", "-l", "-f", file+".pub").Output()
	if len(o.KeyIDs) != 1 || !strings.Contains(string(fp), o.KeyIDs[0]) {
		t.Errorf("keyid %v, ssh-keygen -l says %s", o.KeyIDs, fp)
	}
	// The statement is in-toto's v1, the envelope DSSE's.
	var e struct{ PayloadType, Payload string }
	_ = json.Unmarshal(env, &e)
	body, _ := base64.StdEncoding.DecodeString(e.Payload)
	if !strings.Contains(string(body), `"_type":"https://in-toto.io/Statement/v1"`) || !strings.Contains(string(body), PredicateType) {
		t.Errorf("statement %s", body)
	}

	// One byte of the payload changed: the signature fails.
	b := []byte(e.Payload)
	b[len(b)/2] ^= 1
	if b[len(b)/2] == '+' || b[len(b)/2] == '/' || b[len(b)/2] == '=' {
		b[len(b)/2] = 'A'
	}
	edited := strings.Replace(string(env), e.Payload, string(b), 1)
	if _, err := Open(ctx, []byte(edited), pub); err == nil {
		t.Error("an edited receipt verified")
	}
	// Another key: fails.
	other, _ := LoadPublicKey(sshKey(t, "ed25519") + ".pub")
	if _, err := Open(ctx, env, other); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("another key: %v", err)
	}
	// Unsigned: readable, and says so.
	env, err = Seal(ctx, predicate(), strings.Repeat("e", 64), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(env), `"signatures": []`) {
		t.Errorf("unsigned envelope %s", env)
	}
	if o, err := Open(ctx, env, pub); !errors.Is(err, ErrUnsigned) || o.Toplevel == "" {
		t.Errorf("unsigned: %v", err)
	}
	if _, err := Open(ctx, env, nil); err != nil {
		t.Errorf("unsigned without a key: %v", err)
	}
}

func TestLoadKeyRefuses(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	_ = os.WriteFile(garbage, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nnope\n"), 0o600)
	enc := filepath.Join(dir, "enc")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", enc).CombinedOutput(); err != nil {
		t.Skipf("ssh-keygen: %v %s", err, out)
	}
	for _, f := range []string{filepath.Join(dir, "missing"), garbage, enc, sshKey(t, "rsa")} {
		_, err := LoadKey(f)
		if !errors.Is(err, ErrKey) || strings.Contains(err.Error(), dir) {
			t.Errorf("LoadKey(%s): %v", filepath.Base(f), err)
		}
	}
}
