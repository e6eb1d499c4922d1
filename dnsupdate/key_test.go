package dnsupdate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/switchyard-nix/switchyard/redact"
)

// Key files of every HMAC-SHA algorithm, in the format tsig-keygen writes, with
// comments; refused algorithms and broken files name the problem but never the
// path or the secret (issue 12 item 3).
func TestReadKeyFile(t *testing.T) {
	const secret = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA=="
	want := map[string]string{"hmac-sha1": dns.HmacSHA1, "hmac-sha224": dns.HmacSHA224, "hmac-sha256": dns.HmacSHA256,
		"hmac-sha384": dns.HmacSHA384, "hmac-sha512": dns.HmacSHA512}
	dir := t.TempDir()
	for _, alg := range Algorithms() {
		p := filepath.Join(dir, alg+".key")
		text := fmt.Sprintf("# made by tsig-keygen\n/* a\n block */ key \"Tenant-Key\" {\n\talgorithm %s; // the HMAC\n\tsecret \"%s\";\n};\n", alg, secret)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := ReadKeyFile(p)
		if err != nil {
			t.Fatalf("%s: %v", alg, err)
		}
		if k.Name != "tenant-key." || k.Algorithm != want[alg] || k.secret != secret {
			t.Errorf("%s: got %s %s", alg, k.Name, k.Algorithm)
		}
		for _, f := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
			if s := fmt.Sprintf(f, k); strings.Contains(s, secret) || strings.Contains(s, "secret-secret") {
				t.Errorf("%s shows the secret: %s", f, s)
			}
		}
		if s := fmt.Sprintf("%v", struct{ K Key }{k}); strings.Contains(s, secret) {
			t.Errorf("nested %%v shows the secret: %s", s)
		}
	}
	bad := []struct{ name, text, want string }{
		{"md5", `key "k" { algorithm hmac-md5; secret "` + secret + `"; };`, "line 1: algorithm not supported"},
		{"gss", `key "k" { algorithm gss-tsig; secret "` + secret + `"; };`, "line 1: algorithm not supported"},
		{"no secret", `key "k" { algorithm hmac-sha256; };`, "line 1: the key has no secret"},
		{"no algorithm", `key "k" { secret "` + secret + `"; };`, "line 1: the key has no algorithm"},
		{"bad base64", `key "k" { algorithm hmac-sha256; secret "` + secret + `!!"; };`, "not valid base64"},
		{"two keys", `key "a" { algorithm hmac-sha256; secret "` + secret + `"; }; key "b" { algorithm hmac-sha256; secret "` + secret + `"; };`, "line 1: a second key"},
		{"empty", "# nothing\n", "line 1: no key"},
		{"unterminated", `key "k" { algorithm hmac-sha256; secret "` + secret, "unterminated"},
		{"garbage", `options { };`, `expected "key"`},
	}
	for _, c := range bad {
		p := filepath.Join(dir, "secret-path-"+strings.ReplaceAll(c.name, " ", "-"))
		if err := os.WriteFile(p, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadKeyFile(p)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to say %q", c.name, err, c.want)
		}
		if strings.Contains(err.Error(), "secret-path") || strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%s: error shows the path or the secret: %v", c.name, err)
		}
	}
	_, err := ReadKeyFile(filepath.Join(dir, "secret-path-missing"))
	if err == nil || strings.Contains(err.Error(), "secret-path") || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// SPEC 6.9: an error names the line, never a word of the file.
func TestKeyFileErrorsHoldNoContent(t *testing.T) {
	const m = "MARKERxyz"
	for _, c := range []struct {
		text string
		line int
	}{
		{"root:*:" + m + ":0:99999:7:::\n", 1},
		{"\n" + m + "==\n", 2},
		{"key \"k\" {\n\talgorithm hmac-sha256;\n\tsecret " + m + ";\n};\n", 3},
		{"key \"k\" {\n\talgorithm " + m + ";\n\tsecret \"c2VjcmV0\";\n};\n", 2},
		{"key \"k\" {\n\t" + m + " \"x\";\n};\n", 2},
		{"key \"k\" {\n\t\"" + m + "\" \"x\";\n};\n", 2},
		{"key \"k\" {\n\t" + m + ";\n};\n", 2},
		{"key \"" + m + "\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0\";\n", 3},
		{"key \"" + m + "\" {\n\talgorithm hmac-sha256;\n};\n", 1},
		{"key \"" + m + "..x\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0\";\n};\n", 1},
		{"key \"k\" {\n algorithm hmac-sha256;\n secret \"" + m + "!\";\n};\n", 3},
		{"key \"k\" " + m + " {};\n", 1},
		{"key \"k\" { algorithm hmac-sha256; secret \"c2VjcmV0\"; } " + m + "\n", 1},
		{"key \"a\" { algorithm hmac-sha256; secret \"c2VjcmV0\"; };\nkey \"" + m + "\" { algorithm hmac-sha256; secret \"c2VjcmV0\"; };\n", 2},
	} {
		_, err := parseKeyFile(c.text)
		if err == nil {
			t.Errorf("%q: no error", c.text)
			continue
		}
		if strings.Contains(err.Error(), "MARKER") || strings.Contains(err.Error(), "root") || strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%q: the error shows the file's content: %v", c.text, err)
		}
		if want := fmt.Sprintf("line %d:", c.line); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %q, want it to start with %q", c.text, err, want)
		}
	}
}

func TestReadKeyFileAddsTheSecretToRedact(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	secret := "c2VjcmV0LXJlZGFjdGVkLWtleQ=="
	if err := os.WriteFile(p, []byte(`key "k" { algorithm hmac-sha256; secret "`+secret+`"; };`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeyFile(p); err != nil {
		t.Fatal(err)
	}
	if got := redact.Default.String("nsupdate said " + secret); strings.Contains(got, secret) {
		t.Errorf("not redacted: %q", got)
	}
}
