package credential

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Variables that name credential directories besides the tree's
// submissions.credentialDirs: switchyard's own, colon-separated, and systemd's
// LoadCredential= directory.
const (
	DirsVar    = "SWITCHYARD_CREDENTIAL_DIRS"
	SystemdVar = "CREDENTIALS_DIRECTORY"
)

// Dirs is the credential directories of a run: the tree's, then DirsVar's, then
// SystemdVar's. An entry of a variable that is not an absolute directory below / is a
// refusal naming the variable, so that a typo never widens what a submission may read.
func Dirs(tree []string, getenv func(string) string) ([]string, error) {
	out := append([]string(nil), tree...)
	for _, v := range []string{DirsVar, SystemdVar} {
		raw := getenv(v)
		if raw == "" {
			continue
		}
		entries := []string{raw}
		if v == DirsVar {
			entries = strings.Split(raw, ":")
		}
		for i, e := range entries {
			if !filepath.IsAbs(e) || filepath.Clean(e) == "/" {
				return nil, fmt.Errorf("%s: entry %d is not an absolute directory below /", v, i+1)
			}
			out = append(out, filepath.Clean(e))
		}
	}
	return out, nil
}

// Check makes sure path may be read as a submitted credential: absolute, its real path
// (symlinks resolved) under one of dirs (theirs resolved too), a regular file owned by
// the deployer's effective user with no permission for group or others. It reads the
// file's metadata only, never opens it. Its error never names the path: a credential's
// path is the API's staging layout, which no output shows.
func Check(path string, dirs []string) error {
	if !filepath.IsAbs(path) {
		return errors.New("not an absolute path")
	}
	if len(dirs) == 0 {
		return fmt.Errorf("no credential directory is configured (submissions.credentialDirs, %s or %s)", DirsVar, SystemdVar)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errors.New("no such file")
		}
		return errors.New("cannot be resolved")
	}
	if !under(real, dirs) {
		return fmt.Errorf("not under a credential directory (submissions.credentialDirs, %s, %s)", DirsVar, SystemdVar)
	}
	st, err := os.Lstat(real)
	if err != nil {
		return errors.New("cannot be read")
	}
	return checkMode(st)
}

func under(real string, dirs []string) bool {
	for _, d := range dirs {
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue // a directory that does not exist holds no file
		}
		if strings.HasPrefix(real, rd+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// checkMode refuses anything but a regular file of the effective user without group or
// other permissions: another user's file, or one others can read, is not a secret
// staged for this run.
func checkMode(st fs.FileInfo) error {
	if !st.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not by the deployer's user (uid %d)", sys.Uid, os.Geteuid())
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("mode %04o gives group or others access: want 0600 or 0400", perm)
	}
	return nil
}
