package evalcache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/nix/nixtest"
)

const conf = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fakeDrv is a file standing for a derivation, valid while it exists (FileExists).
func fakeDrv(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "abc-nixos-system-web1.drv")
	if err := os.WriteFile(p, []byte("Derive(...)"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHitMissStale(t *testing.T) {
	c := Open(filepath.Join(t.TempDir(), "cache"), FileExists)
	if _, ok := c.Lookup(conf); ok {
		t.Fatal("hit in an empty cache")
	}
	drv := fakeDrv(t)
	if !c.Store(conf, drv) {
		t.Fatal("store failed")
	}
	if got, ok := c.Lookup(conf); !ok || got != drv {
		t.Fatalf("Lookup = %q, %v; want %s", got, ok, drv)
	}
	if b, _ := os.ReadFile(filepath.Join(c.Dir(), conf)); string(b) != drv+"\n" {
		t.Errorf("entry %q", b)
	}
	os.Remove(drv)
	if _, ok := c.Lookup(conf); ok {
		t.Error("a hit whose derivation is gone")
	}
}

func TestNeverASourceOfTruth(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	c := Open(dir, FileExists)
	drv := fakeDrv(t)
	for name, content := range map[string]string{
		"garbage":       "not a path",
		"relative":      "x.drv\n",
		"not a drv":     "/nix/store/abc-x\n",
		"two lines":     drv + "\n" + drv + "\n",
		"empty":         "",
		"unclean":       "/nix/store/../etc/x.drv",
		"missing drv":   "/nix/store/nonexistent-x.drv\n",
		"trailing junk": drv + " \n",
	} {
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, conf), []byte(content), 0o644)
		if got, ok := c.Lookup(conf); ok {
			t.Errorf("%s: hit %q", name, got)
		}
	}
	// Keys and values that are not what the cache stores are refused, never written.
	for _, k := range []string{"../escape", "ABC", "", conf + "0"} {
		if c.Store(k, drv) {
			t.Errorf("stored under key %q", k)
		}
		if _, ok := c.Lookup(k); ok {
			t.Errorf("hit for key %q", k)
		}
	}
	if c.Store(conf, "relative.drv") {
		t.Error("stored a relative path")
	}
	// Deleting the cache changes no result: Resolve evaluates again.
	os.RemoveAll(dir)
	evals := 0
	eval := func(context.Context) (string, error) { evals++; return drv, nil }
	for i, wantHit := range []bool{false, true} {
		got, hit, err := c.Resolve(context.Background(), conf, eval)
		if err != nil || got != drv || hit != wantHit {
			t.Errorf("resolve %d: %q, hit %v, %v", i, got, hit, err)
		}
	}
	if evals != 1 {
		t.Errorf("%d evaluations, want 1", evals)
	}
	boom := errors.New("boom")
	if _, _, err := c.Resolve(context.Background(), strings.Repeat("f", 64), func(context.Context) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Errorf("an evaluation error: %v", err)
	}
	var nilCache *Cache
	if _, ok := nilCache.Lookup(conf); ok || nilCache.Store(conf, drv) {
		t.Error("a nil cache stores")
	}
}

func TestUnwritableDirectory(t *testing.T) {
	// Tests run as root here, and root writes anywhere: a "directory" under a file, a
	// file, and /proc stand for an unwritable cache.
	parent := t.TempDir()
	blocker := filepath.Join(parent, "file")
	os.WriteFile(blocker, nil, 0o644)
	drv := fakeDrv(t)
	for _, dir := range []string{filepath.Join(blocker, "cache"), blocker, "/proc/switchyard-eval-cache"} {
		c := Open(dir, FileExists)
		if c.Store(conf, drv) {
			t.Errorf("%s: stored", dir)
		}
		got, hit, err := c.Resolve(context.Background(), conf, func(context.Context) (string, error) { return drv, nil })
		if err != nil || hit || got != drv {
			t.Errorf("%s: resolve %q %v %v: an unwritable cache must not fail the run", dir, got, hit, err)
		}
	}
	ro := filepath.Join(parent, "ro")
	os.Mkdir(ro, 0o555)
	if os.Geteuid() != 0 && Open(ro, FileExists).Store(conf, drv) {
		t.Error("stored in a read-only directory")
	}
}

// With the real Nix: a derivation evaluated and cached hits while it is in the store,
// and is ignored once it is deleted from the store.
func TestRealStore(t *testing.T) {
	nixtest.Require(t, "nix-instantiate", "nix-store")
	expr := filepath.Join(t.TempDir(), "x.nix")
	os.WriteFile(expr, []byte(`derivation { name = "switchyard-evalcache-test-`+filepath.Base(filepath.Dir(expr))+`"; system = builtins.currentSystem; builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; }`), 0o644)
	eval := func(ctx context.Context) (string, error) {
		var out, errb bytes.Buffer
		cmd := exec.CommandContext(ctx, "nix-instantiate", expr)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return "", errors.New(errb.String())
		}
		return strings.TrimSpace(out.String()), nil
	}
	c := Open(t.TempDir(), nil)
	drv, hit, err := c.Resolve(context.Background(), conf, eval)
	if err != nil || hit || !strings.HasSuffix(drv, ".drv") {
		t.Fatalf("first resolve: %q %v %v", drv, hit, err)
	}
	if got, hit, _ := c.Resolve(context.Background(), conf, eval); !hit || got != drv {
		t.Fatalf("second resolve: %q, hit %v", got, hit)
	}
	if out, err := exec.Command("nix-store", "--delete", drv).CombinedOutput(); err != nil {
		t.Fatalf("nix-store --delete %s: %v\n%s", drv, err, out)
	}
	if StoreValid(drv) {
		t.Fatal("deleted derivation still valid")
	}
	if _, ok := c.Lookup(conf); ok {
		t.Fatal("a hit whose derivation was deleted from the store")
	}
	again, hit, err := c.Resolve(context.Background(), conf, eval)
	if err != nil || hit || again != drv || !StoreValid(again) {
		t.Fatalf("re-evaluation: %q, hit %v, %v", again, hit, err)
	}
}

// TestUsable: the cache is used only in a directory of the deployer's user that group
// and others cannot write, and is off without a directory (SPEC 6.9); an entry of
// another user in a good directory is not read.
func TestUsable(t *testing.T) {
	if err := Usable(""); err == nil || !strings.Contains(err.Error(), "neither XDG_CACHE_HOME nor HOME") {
		t.Errorf("no directory: %v", err)
	}
	fresh := filepath.Join(t.TempDir(), "a", "eval")
	if err := Usable(fresh); err != nil {
		t.Errorf("a fresh directory: %v", err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("made %v, %v; want mode 0700", fi, err)
	}
	shared := t.TempDir()
	os.Chmod(shared, 0o775)
	if err := Usable(shared); err == nil || !strings.Contains(err.Error(), "mode 0775: writable by group or others") {
		t.Errorf("a group-writable directory: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("unprivileged: no directory of another user can be made")
	}
	theirs := t.TempDir()
	os.Chown(theirs, 65534, 65534)
	if err := Usable(theirs); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("another user's directory: %v", err)
	}
	dir := t.TempDir()
	conf := strings.Repeat("a", 64)
	drv := filepath.Join(t.TempDir(), "x.drv")
	os.WriteFile(drv, nil, 0o644)
	c := Open(dir, FileExists)
	if !c.Store(conf, drv) {
		t.Fatal("store")
	}
	if _, ok := c.Lookup(conf); !ok {
		t.Fatal("lookup of the deployer's entry")
	}
	os.Chown(filepath.Join(dir, conf), 65534, 65534)
	if got, ok := c.Lookup(conf); ok {
		t.Errorf("an entry of another user was read: %s", got)
	}
}
