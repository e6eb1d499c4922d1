package dnsupdate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
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
		{"md5", `key "k" { algorithm hmac-md5; secret "` + secret + `"; };`, `algorithm "hmac-md5" not supported`},
		{"gss", `key "k" { algorithm gss-tsig; secret "` + secret + `"; };`, `algorithm "gss-tsig" not supported`},
		{"no secret", `key "k" { algorithm hmac-sha256; };`, "no secret"},
		{"no algorithm", `key "k" { secret "` + secret + `"; };`, "no algorithm"},
		{"bad base64", `key "k" { algorithm hmac-sha256; secret "` + secret + `!!"; };`, "not valid base64"},
		{"two keys", `key "a" { algorithm hmac-sha256; secret "` + secret + `"; }; key "b" { algorithm hmac-sha256; secret "` + secret + `"; };`, "2 keys"},
		{"empty", "# nothing\n", "no key"},
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
