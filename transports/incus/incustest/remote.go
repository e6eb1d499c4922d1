// Package incustest exposes the test bed's local Incus daemon as an HTTPS
// remote of an Incus client configuration, for the tests of the incus
// transport's remotes. The daemon's core.https_address is global: Remote holds
// a lock across processes while it is changed, and restores it.
package incustest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// Remote is the local daemon listening on a loopback HTTPS address, with an
// Incus client configuration directory that names it.
type Remote struct {
	Name string // the remote's name in config.yml
	Dir  string // the client configuration directory (for INCUS_CONF)
	Addr string // "https://127.0.0.1:<port>"

	serverCert []byte // PEM of the daemon's certificate
	clientCert []byte // PEM of the trusted client certificate
	clientKey  []byte // PEM of its key
}

// lockPath serialises the tests (of any package) that change the daemon's
// core.https_address.
var lockPath = filepath.Join(os.TempDir(), "switchyard-incus-https.lock")

// NewRemote makes the daemon listen on 127.0.0.1:<a free port>, trusts a new
// client certificate, and writes a client configuration directory with the
// remote name (addr, protocol incus, the server certificate pinned in
// servercerts/<name>.crt, client.crt and client.key). Everything is undone in
// t.Cleanup. The caller points INCUS_CONF at Dir for the code under test; the
// incus commands here use the local socket whatever INCUS_CONF says.
func NewRemote(t testing.TB, name string) *Remote {
	t.Helper()
	lock(t)
	old, err := incus("config", "get", "core.https_address")
	if err != nil {
		t.Fatal(err)
	}
	old = strings.TrimSpace(old)
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	hostPort := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if _, err := incus("config", "set", "core.https_address", hostPort); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var err error
		if old == "" {
			_, err = incus("config", "unset", "core.https_address")
		} else {
			_, err = incus("config", "set", "core.https_address", old)
		}
		if err != nil {
			t.Errorf("restoring core.https_address %q: %v", old, err)
		}
	})
	if err := waitListen(hostPort, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	r := &Remote{Name: name, Dir: t.TempDir(), Addr: "https://" + hostPort}
	r.clientCert, r.clientKey = SelfSigned(t, "switchyard-test")
	crtFile := filepath.Join(r.Dir, "client.crt")
	writeFile(t, crtFile, r.clientCert, 0o644)
	writeFile(t, filepath.Join(r.Dir, "client.key"), r.clientKey, 0o600)
	block, _ := pem.Decode(r.clientCert)
	fp := api.Fingerprint(block.Bytes)
	if _, err := incus("config", "trust", "add-certificate", crtFile, "--name", "switchyard-test-"+fp[:12]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := incus("config", "trust", "remove", fp); err != nil {
			t.Errorf("removing the test's client certificate from the trust store: %v", err)
		}
	})

	dir := os.Getenv("INCUS_DIR")
	if dir == "" {
		dir = "/var/lib/incus"
	}
	r.serverCert, err = os.ReadFile(filepath.Join(dir, "server.crt"))
	if err != nil {
		t.Fatalf("the daemon's certificate: %v", err)
	}
	r.write(t, r.Dir, r.serverCert)
	return r
}

// WithServerCert is another configuration directory for the same remote and
// client certificate, with serverCert (PEM) pinned instead of the daemon's.
func (r *Remote) WithServerCert(t testing.TB, serverCert []byte) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "client.crt"), r.clientCert, 0o644)
	writeFile(t, filepath.Join(dir, "client.key"), r.clientKey, 0o600)
	r.write(t, dir, serverCert)
	return dir
}

// write writes config.yml and the pinned server certificate into dir.
func (r *Remote) write(t testing.TB, dir string, serverCert []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "servercerts"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "servercerts", r.Name+".crt"), serverCert, 0o644)
	conf := fmt.Sprintf(`default-remote: local
remotes:
  images:
    addr: https://images.linuxcontainers.org
    protocol: simplestreams
    public: true
  local:
    addr: unix://
    protocol: incus
    public: false
  %s:
    addr: %s
    auth_type: tls
    protocol: incus
    public: false
aliases: {}
`, r.Name, r.Addr)
	writeFile(t, filepath.Join(dir, "config.yml"), []byte(conf), 0o644)
}

// SelfSigned makes a self-signed ECDSA P-384 certificate and its key (PEM), as
// the Incus client makes its client certificate.
func SelfSigned(t testing.TB, cn string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"switchyard tests"}, CommonName: cn},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{cn},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// lock takes the lock of lockPath until the test's end, waiting up to ten
// minutes for another test (maybe in another process) to give it up.
func lock(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if err != syscall.EWOULDBLOCK || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("lock %s: %v", lockPath, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Registered first, so it runs after every other cleanup of the remote.
	t.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}

// incus runs the incus client on the local socket.
func incus(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "incus", append([]string{"--force-local"}, args...)...)
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "INCUS_CONF=") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("incus %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitListen(hostPort string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", hostPort, 2*time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon does not listen on %s: %v", hostPort, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func writeFile(t testing.TB, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}
