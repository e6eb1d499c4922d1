package clientconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
	"github.com/switchyard-nix/switchyard/transports/incus/incustest"
)

func TestLoad(t *testing.T) {
	in := `# written by hand
default-remote: "prod"
remotes:
  images:
    addr: https://images.linuxcontainers.org
    protocol: simplestreams
    public: true
  'prod':
    addr: 'https://10.0.2.4:8443'   # the cluster
    auth_type: tls
    project: "tenant-a"
    protocol: incus
    public: false
  local:
    addr: unix://
    list:
    - a
    - b: c
      d: e
    text: |
      some: text
  empty:
aliases: {}
defaults:
  list_format: ""
  no_color: false
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Dir: dir, DefaultRemote: "prod", Remotes: map[string]Remote{
		"images": {Name: "images", Addr: "https://images.linuxcontainers.org", Protocol: "simplestreams", Public: true},
		"prod":   {Name: "prod", Addr: "https://10.0.2.4:8443", AuthType: "tls", Project: "tenant-a", Protocol: "incus"},
		"local":  {Name: "local", Addr: "unix://"},
		"empty":  {Name: "empty"},
	}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Load (-want +got):\n%s", d)
	}
	for _, bad := range []string{"a: 1\n  b: 2\n", "a: \"x\n", "remotes:\n  x\n", "remotes: [1]\n"} {
		if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir); err == nil {
			t.Errorf("Load of %q accepted", bad)
		}
	}
}

// confDir writes a client configuration with the remotes of body.
func confDir(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte("default-remote: local\nremotes:\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeClientCert(t *testing.T, dir string) {
	t.Helper()
	crt, key := incustest.SelfSigned(t, "client")
	for name, data := range map[string][]byte{"client.crt": crt, "client.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEndpointErrors(t *testing.T) {
	dir := confDir(t, `  images:
    addr: https://images.linuxcontainers.org
    protocol: simplestreams
    public: true
  sso:
    addr: https://10.0.2.5:8443
    auth_type: oidc
    protocol: incus
  prod:
    addr: https://10.0.2.4
    protocol: incus
    project: tenant-a
  sock:
    addr: unix:///run/other/unix.socket
    protocol: incus
  badaddr:
    addr: ftp://x
    protocol: incus
`)
	t.Setenv("INCUS_CONF", dir)
	for remote, want := range map[string]string{
		"nosuch":  `incus remote "nosuch" is not in the Incus client configuration`,
		"images":  `incus remote "images": protocol "simplestreams" is an image server`,
		"sso":     `incus remote "sso": auth_type "oidc" is not supported`,
		"prod":    `incus remote "prod": the Incus client configuration has no client certificate`,
		"badaddr": `incus remote "badaddr": incus address "ftp://x"`,
	} {
		_, err := Open(remote)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%q): %v, want %q...", remote, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "client.key") {
			t.Errorf("Open(%q) names the key's file: %v", remote, err)
		}
	}
	// Only the key missing: the remote named, not the key's path.
	crt, _ := incustest.SelfSigned(t, "client")
	if err := os.WriteFile(filepath.Join(dir, "client.crt"), crt, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("prod"); err == nil || !strings.Contains(err.Error(), `"prod"`) || strings.Contains(err.Error(), dir) {
		t.Errorf("no client key: %v", err)
	}

	writeClientCert(t, dir)
	ep, err := Open("prod")
	if err != nil {
		t.Fatal(err)
	}
	// No pinned server certificate: the system roots and the host name.
	if ep.Addr != "10.0.2.4:8443" || ep.Project != "tenant-a" || ep.IsLocal() || ep.TLS.InsecureSkipVerify || ep.TLS.ServerName != "10.0.2.4" {
		t.Errorf("prod: %+v", ep)
	}
	ep, err = Open("sock")
	if err != nil || ep.Socket != "/run/other/unix.socket" {
		t.Errorf("a unix:// remote: %+v, %v", ep, err)
	}
	for _, local := range []string{"", "local"} {
		if ep, err := Open(local); err != nil || ep.Socket != api.Socket() {
			t.Errorf("Open(%q): %+v, %v", local, ep, err)
		}
	}
	// No config.yml: the client's defaults.
	t.Setenv("INCUS_CONF", t.TempDir())
	if _, err := Open("prod"); err == nil || !strings.Contains(err.Error(), `"prod" is not in`) {
		t.Errorf("no config.yml: %v", err)
	}
}

// The pin against a TLS server of this test: its own certificate is accepted,
// another is refused with api.ErrServerCert, and the client certificate is sent.
func TestPinnedServerCert(t *testing.T) {
	var gotClient []byte
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			gotClient = r.TLS.PeerCertificates[0].Raw
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"sync","status":"Success","status_code":200,"metadata":{"name":"web1","status":"Running","type":"container"}}`))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	serverPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	dir := confDir(t, "  srv:\n    addr: "+srv.URL+"\n    protocol: incus\n")
	writeClientCert(t, dir)
	if err := os.MkdirAll(filepath.Join(dir, "servercerts"), 0o755); err != nil {
		t.Fatal(err)
	}
	pin := func(p []byte) {
		if err := os.WriteFile(filepath.Join(dir, "servercerts", "srv.crt"), p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("INCUS_CONF", dir)
	ctx := context.Background()

	pin(serverPEM)
	ep, err := Open("srv")
	if err != nil {
		t.Fatal(err)
	}
	c := ep.Client()
	inst, err := c.Instance(ctx, "default", "web1")
	if err != nil || inst.Name != "web1" {
		t.Fatalf("the pinned server: %+v, %v", inst, err)
	}
	crtPEM, _ := os.ReadFile(filepath.Join(dir, "client.crt"))
	block, _ := pem.Decode(crtPEM)
	if string(gotClient) != string(block.Bytes) {
		t.Error("the server did not get the client certificate")
	}
	c.Close()

	other, _ := incustest.SelfSigned(t, "127.0.0.1")
	pin(other)
	ep, err = Open("srv")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ep.Client().Instance(ctx, "default", "web1")
	if !errors.Is(err, api.ErrServerCert) || !api.IsDial(err) {
		t.Errorf("another pinned certificate: %v, want ErrServerCert", err)
	}

	// No pin: the system roots, which do not know the test server.
	if err := os.Remove(filepath.Join(dir, "servercerts", "srv.crt")); err != nil {
		t.Fatal(err)
	}
	ep, err = Open("srv")
	if err != nil {
		t.Fatal(err)
	}
	_, err = ep.Client().Instance(ctx, "default", "web1")
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("no pin, an unknown CA: %v", err)
	}
}
