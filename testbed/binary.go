package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// CredentialDirs is where the tests' submissions stage credentials: the bed's client
// key's directory and the temporary directory tests write theirs in.
func CredentialDirs() []string {
	return []string{filepath.Join(CacheDir(), "ssh"), os.TempDir()}
}

// RunWithSwitchyard is a TestMain body for packages that run the real switchyard
// binary: it builds cmd/switchyard into a scratch directory, stores its path in
// *binary, runs the tests and removes the directory; it returns the exit code.
//
// The binaries it starts inherit CredentialDirs as SWITCHYARD_CREDENTIAL_DIRS, as an
// operator's deployer would set it: the tests submit the bed's client key and
// credentials they stage (mode 0600) in their temporary directories. A test of the
// confinement itself sets the variable again for its run.
func RunWithSwitchyard(m *testing.M, binary *string) int {
	if err := os.Setenv("SWITCHYARD_CREDENTIAL_DIRS", strings.Join(CredentialDirs(), ":")); err != nil {
		fmt.Fprintf(os.Stderr, "credential dirs: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "switchyard-bin")
	if err != nil {
		fmt.Fprintf(os.Stderr, "build switchyard: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	*binary = filepath.Join(dir, "switchyard")
	cmd := exec.Command("go", "build", "-o", *binary, "./cmd/switchyard")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build switchyard: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}
