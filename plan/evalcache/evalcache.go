// Package evalcache is the eval cache of SPEC 6.6: it maps a node's nixos_conf to the
// derivation path of its toplevel, so an unchanged node is not evaluated again.
//
// The cache is never a source of truth: a hit whose derivation is no longer valid in the
// store is ignored (and evaluated again), an entry that does not read as a derivation
// path is ignored, a cache directory that cannot be created or written is not an error
// (the store just does not happen), and deleting the directory changes no result, only
// the time to reach it.
//
// An entry is the file <dir>/<nixos_conf> holding the .drv path and a newline, written
// atomically (a temporary file renamed into place), so concurrent runs sharing the
// directory never read half an entry.
package evalcache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Cache is an eval cache in a directory.
type Cache struct {
	dir   string
	valid func(drv string) bool
}

// Open is the cache in dir (DEPLOY_EVAL_CACHE_DIR, resolved by the caller). It creates
// nothing yet. valid says whether a derivation is still in the store; nil is StoreValid.
func Open(dir string, valid func(drv string) bool) *Cache {
	if valid == nil {
		valid = StoreValid
	}
	return &Cache{dir: dir, valid: valid}
}

// Usable makes the cache directory when it is missing (mode 0700) and says why the
// cache must not be used (SPEC 6.9): an entry names what is built and deployed, so a
// directory another user owns, or that group or others may write, could plant one.
// The directory is followed through symlinks; nil means it may be used.
func Usable(dir string) error {
	if dir == "" {
		return errors.New("neither XDG_CACHE_HOME nor HOME is set")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s cannot be made: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if err := owned(fi, "directory"); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}

// owned refuses what the deployer's user does not own or what group or others may write.
func owned(fi os.FileInfo, what string) error {
	if uid, ok := ownerOf(fi); !ok || uid != os.Geteuid() {
		return fmt.Errorf("the %s belongs to uid %d, not the deployer's (%d)", what, uid, os.Geteuid())
	}
	if m := fi.Mode().Perm(); m&0o022 != 0 {
		return fmt.Errorf("the %s has mode %04o: writable by group or others", what, m)
	}
	return nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

var confPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Lookup is the derivation cached for a nixos_conf, when there is one and it is still
// in the store.
func (c *Cache) Lookup(nixosConf string) (drv string, ok bool) {
	if c == nil || c.dir == "" || !confPattern.MatchString(nixosConf) {
		return "", false
	}
	b, err := readOwned(filepath.Join(c.dir, nixosConf))
	if err != nil {
		return "", false
	}
	drv = strings.TrimSuffix(string(b), "\n")
	if !isDrvPath(drv) || !c.valid(drv) {
		return "", false
	}
	return drv, true
}

// Store records the derivation of a nixos_conf. It reports whether the entry was written;
// a failure is never an error of the run.
func (c *Cache) Store(nixosConf, drv string) bool {
	if c == nil || c.dir == "" || !confPattern.MatchString(nixosConf) || !isDrvPath(drv) {
		return false
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return false
	}
	tmp, err := os.CreateTemp(c.dir, "."+nixosConf[:12]+".*")
	if err != nil {
		return false
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(drv + "\n")
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		return false
	}
	return os.Rename(tmp.Name(), filepath.Join(c.dir, nixosConf)) == nil
}

// Resolve is the derivation of a nixos_conf: the cached one when valid (hit), otherwise
// eval's, which is then stored. An evaluation error is returned as is.
func (c *Cache) Resolve(ctx context.Context, nixosConf string, eval func(context.Context) (string, error)) (drv string, hit bool, err error) {
	if drv, ok := c.Lookup(nixosConf); ok {
		return drv, true, nil
	}
	drv, err = eval(ctx)
	if err != nil {
		return "", false, err
	}
	c.Store(nixosConf, drv)
	return drv, false, nil
}

// readOwned reads an entry that the deployer's user owns and nobody else may write (a
// directory that was safe once may hold an entry planted before it was).
func readOwned(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := owned(fi, "entry"); err != nil || !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return nil, errors.New("not the deployer's entry")
	}
	return io.ReadAll(f)
}

// isDrvPath: an absolute, clean path of a .drv file, on one line.
func isDrvPath(p string) bool {
	return strings.HasSuffix(p, ".drv") && filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsAny(p, "\n\x00")
}

// StoreValid says whether a derivation is valid in the local Nix store:
// `nix-store --check-validity` (which also catches a path left on disk but gone from the
// store's database), after a quick look that the file exists.
func StoreValid(drv string) bool {
	if _, err := os.Stat(drv); err != nil {
		return false
	}
	return exec.Command("nix-store", "--check-validity", drv).Run() == nil
}

// FileExists is a validity check that only looks at the file, for tests and machines
// without nix-store on PATH.
func FileExists(drv string) bool {
	_, err := os.Stat(drv)
	return err == nil
}
