package clientconf

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
	"github.com/switchyard-nix/switchyard/transports/incus/incustest"
)

// noLeak fails when err shows a path or PEM content.
func noLeak(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error shows %q: %v", s, err)
		}
	}
	if strings.Contains(err.Error(), "BEGIN") {
		t.Errorf("error shows PEM content: %v", err)
	}
}

// incusClientKeyFile's refusals (issue 12 item 6), without a daemon: a missing
// file, a file without a key, a key that is not the certificate's, a key for
// the local socket. The errors name the setting, never the path or the key.
func TestKeyFileErrors(t *testing.T) {
	dir := confDir(t, "  r:\n    addr: https://127.0.0.1:9\n    protocol: incus\n")
	writeClientCert(t, dir)
	t.Setenv("INCUS_CONF", dir)
	secretDir := filepath.Join(t.TempDir(), "secret-place")
	if err := os.MkdirAll(secretDir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(secretDir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	otherCrt, otherKey := incustest.SelfSigned(t, "other")
	for what, tc := range map[string]struct {
		remote, file, want string
	}{
		"missing":    {"r", filepath.Join(secretDir, "nokey.pem"), "cannot be read (missing)"},
		"no key":     {"r", write("cert-only.pem", otherCrt), "no PEM private key"},
		"mismatch":   {"r", write("other.key", otherKey), "does not go with the client certificate"},
		"local":      {"local", write("local.key", otherKey), "unix socket"},
		"local name": {"", write("local2.key", otherKey), "unix socket"},
	} {
		_, err := OpenWithKey(tc.remote, tc.file)
		if err == nil {
			t.Errorf("%s: no error", what)
			continue
		}
		if !strings.HasPrefix(err.Error(), "incusClientKeyFile: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want incusClientKeyFile: ...%s", what, err, tc.want)
		}
		noLeak(t, err, secretDir, tc.file, string(otherKey))
		t.Logf("%s: %v", what, err)
	}
	// No key file: the configuration's key, as Open.
	ep, err := OpenWithKey("r", "")
	if err != nil || ep.Addr != "127.0.0.1:9" {
		t.Errorf("OpenWithKey without a key file: %+v, %v", ep, err)
	}
}

// incusClientKeyFile against the test bed's daemon on a loopback HTTPS address
// (issue 12 item 6): the key file replaces the configuration's key (which is
// broken here, so Open fails); a key file holding a certificate too uses that
// certificate (not trusted by the daemon: its requests are refused).
func TestKeyFileRemote(t *testing.T) {
	testbed.Require(t)
	remote := incustest.NewRemote(t, "keyremote")
	t.Setenv("INCUS_CONF", remote.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	trusted, err := os.ReadFile(filepath.Join(remote.Dir, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "client.key")
	if err := os.WriteFile(keyFile, trusted, 0o600); err != nil {
		t.Fatal(err)
	}
	// The configuration's own key no longer goes with its certificate.
	_, stranger := incustest.SelfSigned(t, "stranger")
	if err := os.WriteFile(filepath.Join(remote.Dir, "client.key"), stranger, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(remote.Name); err == nil {
		t.Fatal("Open with a broken client.key: no error")
	}

	ep, err := OpenWithKey(remote.Name, keyFile)
	if err != nil {
		t.Fatalf("OpenWithKey: %v", err)
	}
	c := ep.Client()
	defer c.Close()
	p, err := c.Project(ctx, api.DefaultProject)
	if err != nil || p.Name != api.DefaultProject {
		t.Fatalf("a request with the key file's key: %+v, %v", p, err)
	}

	// A key file with its own (untrusted) certificate: it loads, the daemon refuses it.
	crt, key := incustest.SelfSigned(t, "untrusted")
	both := filepath.Join(t.TempDir(), "both.pem")
	if err := os.WriteFile(both, append(append([]byte{}, crt...), key...), 0o600); err != nil {
		t.Fatal(err)
	}
	ep, err = OpenWithKey(remote.Name, both)
	if err != nil {
		t.Fatalf("OpenWithKey with a certificate in the key file: %v", err)
	}
	c2 := ep.Client()
	defer c2.Close()
	if _, err := c2.Project(ctx, api.DefaultProject); err == nil {
		t.Error("an untrusted certificate from the key file was accepted: the file's certificate is not the one used")
	} else {
		t.Logf("untrusted certificate: %v", err)
	}

	// A key that does not go with the configuration's certificate.
	mismatch := filepath.Join(t.TempDir(), "mismatch.key")
	if err := os.WriteFile(mismatch, stranger, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenWithKey(remote.Name, mismatch)
	if err == nil || !strings.HasPrefix(err.Error(), "incusClientKeyFile: ") {
		t.Fatalf("a key that does not match: %v", err)
	}
	noLeak(t, err, mismatch, string(stranger))
}
