// Package testbed runs real nodes for tests: Incus containers with systemd as PID 1,
// sshd reachable on a loopback port, Nix, and test closures built with nix-build.
//
// testbed/setup.sh installs and starts what this package needs. A test that needs the
// test bed calls Require; when the test bed is missing it skips, unless
// SWITCHYARD_TESTBED=require (set by the README's test command and CI), where it fails.
package testbed

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// Bed is a started test bed: incusd answering and the node image imported.
type Bed struct {
	Image   string // Incus image alias of the node image
	Root    string // repository root
	KeyFile string // the client SSH private key every node trusts

	api *api.Client // the local daemon's API ($INCUS_DIR, as the incus CLI)
}

var (
	bedOnce sync.Once
	bed     *Bed
	bedErr  error
)

// Require returns the test bed, or ends the test: a skip normally, a failure when
// SWITCHYARD_TESTBED=require.
func Require(t testing.TB) *Bed {
	t.Helper()
	bedOnce.Do(func() { bed, bedErr = Open() })
	if bedErr != nil {
		Unavailable(t, "test bed", "testbed/setup.sh", bedErr)
	}
	return bed
}

// Unavailable ends a test that needs a part of the test bed that is missing (what,
// made by running setup): a skip normally, a failure when SWITCHYARD_TESTBED=require,
// so that the test command never passes by skipping.
func Unavailable(t testing.TB, what, setup string, err error) {
	t.Helper()
	if os.Getenv("SWITCHYARD_TESTBED") == "require" {
		t.Fatalf("%s required but not available: %v", what, err)
	}
	t.Skipf("%s not available (run %s as root): %v", what, setup, err)
}

// RepoRoot is the repository root, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// CacheDir is where the test bed keeps heavy artefacts between runs.
func CacheDir() string {
	if d := os.Getenv("SWITCHYARD_TESTBED_CACHE"); d != "" {
		return d
	}
	return "/var/cache/switchyard-testbed"
}

// Open checks the test bed is up and returns it.
func Open() (*Bed, error) {
	root := RepoRoot()
	for _, tool := range []string{"incus", "nix-build", "nix-copy-closure", "ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not on PATH", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "incus", "admin", "waitready", "--timeout=10").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("incusd not answering: %v: %s", err, bytes.TrimSpace(out))
	}
	image, err := imageAlias(root)
	if err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "incus", "image", "info", image).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("node image %s not imported: %v: %s", image, err, bytes.TrimSpace(out))
	}
	key, err := ClientKey()
	if err != nil {
		return nil, err
	}
	return &Bed{Image: image, Root: root, KeyFile: key, api: api.New("")}, nil
}

// imageAlias is the alias setup.sh gives the image built from the current recipe.
func imageAlias(root string) (string, error) {
	if a := os.Getenv("SWITCHYARD_TESTBED_IMAGE"); a != "" {
		return a, nil
	}
	recipe, err := os.ReadFile(filepath.Join(root, "testbed", "image-recipe.sh"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(recipe)
	return "switchyard-node-" + hex.EncodeToString(sum[:])[:12], nil
}

// ClientKey returns the test bed's client key (Bed.KeyFile; the VM tier's image trusts
// it too), creating it once per machine. It is generated into a fresh directory that
// is renamed into place, so concurrent test processes agree on one key.
func ClientKey() (string, error) {
	dir := filepath.Join(CacheDir(), "ssh")
	key := filepath.Join(dir, "id_ed25519")
	if _, err := os.Stat(key + ".pub"); err == nil {
		return key, nil
	}
	if err := os.MkdirAll(CacheDir(), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(CacheDir(), "ssh.tmp")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "switchyard-testbed",
		"-f", filepath.Join(tmp, "id_ed25519")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("ssh-keygen: %v: %s", err, out)
	}
	if err := os.Chmod(tmp, 0o700); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, statErr := os.Stat(key + ".pub"); statErr != nil {
			return "", err
		}
	}
	return key, nil
}

// randomSuffix makes node names unique across concurrent tests and processes.
func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// nodeName derives an Incus instance name (at most 63 characters, [a-z0-9-]) from a test name.
func nodeName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	for strings.Contains(base, "--") {
		base = strings.ReplaceAll(base, "--", "-")
	}
	if len(base) > 40 {
		base = strings.Trim(base[len(base)-40:], "-")
	}
	return "sy-" + base + "-" + randomSuffix()
}

// incus runs the incus client and returns its stdout.
func incus(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "incus", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("incus %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}
