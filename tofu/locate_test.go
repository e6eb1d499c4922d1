package tofu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/hc-install/fs"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestSources(t *testing.T) {
	s := sources(env(map[string]string{EnvTofu: "/x/tofu"}))
	if len(s) != 1 || s[0].(*fs.AnyVersion).ExactBinPath != "/x/tofu" {
		t.Errorf("SWITCHYARD_TOFU: %#v", s)
	}
	s = sources(env(nil))
	if len(s) != 2 || s[0].(*fs.Version).Product.BinaryName() != "tofu" || s[1].(*fs.Version).Product.BinaryName() != "terraform" {
		t.Fatalf("PATH search: %#v", s)
	}
	for _, v := range []string{"1.5.7", "1.6.0-alpha1"} {
		if s[0].(*fs.Version).Constraints.Check(mustVersion(t, v)) {
			t.Errorf("%s meets the minimum", v)
		}
	}
}

// TestLocateRealBinaries runs hc-install against the tofu of the test bed
// (SWITCHYARD_TOFU, a source build that says 1.10.6-dev) and terraform on PATH.
func TestLocateRealBinaries(t *testing.T) {
	ctx := context.Background()
	bin := os.Getenv(EnvTofu)
	if bin == "" {
		if os.Getenv("SWITCHYARD_TESTBED") == "require" {
			t.Fatal("SWITCHYARD_TOFU unset")
		}
		t.Skip("SWITCHYARD_TOFU unset")
	}
	b, err := Locate(ctx, env(map[string]string{EnvTofu: bin}))
	if err != nil || b.Path != bin || b.Version.LessThan(MinVersion) || b.Version.Prerelease() != "" {
		t.Errorf("Locate(%s) = %+v, %v", bin, b, err)
	}
	if _, err := Locate(ctx, env(map[string]string{EnvTofu: "/etc/hostname"})); !errors.Is(err, ErrBadTofu) {
		t.Errorf("not executable: %v", err)
	}
	if _, err := Locate(ctx, env(map[string]string{EnvTofu: "/bin/true"})); !errors.Is(err, ErrBadTofu) {
		t.Errorf("not OpenTofu: %v", err)
	}
	if p, err := exec.LookPath("terraform"); err == nil {
		dir := t.TempDir()
		// Only terraform on PATH: it is the fallback.
		t.Setenv("PATH", dir+":"+filepath.Dir(p))
		if _, err := exec.LookPath("tofu"); err == nil {
			t.Fatalf("tofu next to terraform in %s", filepath.Dir(p))
		}
		b, err := Locate(ctx, env(nil))
		if err != nil || b.Path != p {
			t.Errorf("terraform fallback: %+v %v", b, err)
		}
		if err := os.Symlink(bin, dir+"/tofu"); err != nil {
			t.Fatal(err)
		}
		if b, err := Locate(ctx, env(nil)); err != nil || b.Path != dir+"/tofu" {
			t.Errorf("tofu first: %+v %v", b, err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Locate(ctx, env(nil)); err == nil || errors.Is(err, ErrBadTofu) {
		t.Errorf("nothing on PATH: %v", err)
	}
}

func mustVersion(t *testing.T, s string) *version.Version {
	t.Helper()
	v, err := version.NewVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
