package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RunWithSwitchyard is a TestMain body for packages that run the real switchyard
// binary: it builds cmd/switchyard into a scratch directory, stores its path in
// *binary, runs the tests and removes the directory; it returns the exit code.
func RunWithSwitchyard(m *testing.M, binary *string) int {
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
