package testbed

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BinaryCache is a signed Nix binary cache (a file cache's directory) served over
// HTTP on loopback: the stand-in for a binary cache in a node's nix.conf.
type BinaryCache struct {
	URL       string // http://127.0.0.1:PORT
	Port      int    // the loopback port it is served on
	PublicKey string // its trusted-public-keys entry

	dir, secretKey string
	srv            *http.Server
}

// NewBinaryCache makes a signed, empty cache and serves it until the test ends.
func NewBinaryCache(t testing.TB) *BinaryCache {
	t.Helper()
	keys := t.TempDir()
	c := &BinaryCache{dir: t.TempDir(), secretKey: filepath.Join(keys, "secret")}
	pubFile := filepath.Join(keys, "public")
	hostRun(t, "nix-store", "--generate-binary-cache-key", "switchyard-test-cache-1", c.secretKey, pubFile)
	pub, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	c.PublicKey = strings.TrimSpace(string(pub))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.srv = &http.Server{Handler: http.FileServer(http.Dir(c.dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	t.Cleanup(c.Down)
	c.Port = ln.Addr().(*net.TCPAddr).Port
	c.URL = "http://127.0.0.1:" + strconv.Itoa(c.Port)
	return c
}

// Hold puts paths and their closures into the cache, signed.
func (c *BinaryCache) Hold(t testing.TB, paths ...string) {
	t.Helper()
	to := "file://" + c.dir + "?compression=none&secret-key=" + c.secretKey
	hostRun(t, append([]string{"nix", "--extra-experimental-features", "nix-command", "copy", "--to", to}, paths...)...)
}

// Down stops serving: the cache is unreachable from then on.
func (c *BinaryCache) Down() { _ = c.srv.Close() }

// hostRun runs argv on this machine, failing the test with its output.
func hostRun(t testing.TB, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}
