package testbed

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Build builds a test closure (an attribute of testbed/closures) with the real
// nix-build and returns its toplevel store path. A non-empty tag makes a distinct
// toplevel of the same behaviour.
func (b *Bed) Build(t testing.TB, attr, tag string) string {
	t.Helper()
	return BuildClosure(t, attr, tag)
}

// BuildClosure is Bed.Build for tests that need no Incus (the VM tier): nix-build
// alone builds the closures.
func BuildClosure(t testing.TB, attr, tag string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{filepath.Join(RepoRoot(), "testbed", "closures"), "-A", attr, "--no-out-link"}
	if tag != "" {
		args = append(args, "--argstr", "tag", tag)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "nix-build", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nix-build -A %s: %v\n%s", attr, err, stderr.String())
	}
	out := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(out, "/nix/store/") || strings.Contains(out, "\n") {
		t.Fatalf("nix-build -A %s printed %q, want one store path", attr, out)
	}
	return out
}
