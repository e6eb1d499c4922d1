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

func TestCheckVersion(t *testing.T) {
	for in, want := range map[string]string{"1.10.6-dev": "1.10.6", "1.11.4": "1.11.4", "1.6.0": "1.6.0", "1.5.7": "", "1.6.0-alpha1": "1.6.0"} {
		v, err := CheckVersion(mustVersion(t, in), nil)
		if want == "" {
			if !errors.Is(err, ErrBadTofu) {
				t.Errorf("%s: %v", in, err)
			}
			continue
		}
		if err != nil || v.String() != want {
			t.Errorf("%s: %v %v", in, v, err)
		}
	}
	if _, err := CheckVersion(nil, errors.New("exit 1")); !errors.Is(err, ErrBadTofu) {
		t.Errorf("failed version: %v", err)
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
	if p, err := Locate(ctx, env(map[string]string{EnvTofu: bin})); err != nil || p != bin {
		t.Errorf("Locate(%s) = %s, %v", bin, p, err)
	}
	if v, err := CheckVersion(binaryVersion(ctx, bin)); err != nil || v.LessThan(MinVersion) {
		t.Errorf("version of %s: %v %v", bin, v, err)
	}
	plain := filepath.Join(t.TempDir(), "tofu")
	if err := os.WriteFile(plain, []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Locate(ctx, env(map[string]string{EnvTofu: plain})); !errors.Is(err, ErrBadTofu) {
		t.Errorf("not executable: %v", err)
	}
	if _, err := CheckVersion(binaryVersion(ctx, "/bin/true")); !errors.Is(err, ErrBadTofu) {
		t.Errorf("not OpenTofu: %v", err)
	}
	if p, err := exec.LookPath("terraform"); err == nil {
		dir := t.TempDir()
		// Only terraform on PATH: it is the fallback.
		t.Setenv("PATH", dir+":"+filepath.Dir(p))
		if _, err := exec.LookPath("tofu"); err == nil {
			t.Fatalf("tofu next to terraform in %s", filepath.Dir(p))
		}
		if got, err := Locate(ctx, env(nil)); err != nil || got != p {
			t.Errorf("terraform fallback: %s %v", got, err)
		}
		if err := os.Symlink(bin, dir+"/tofu"); err != nil {
			t.Fatal(err)
		}
		if got, err := Locate(ctx, env(nil)); err != nil || got != dir+"/tofu" {
			t.Errorf("tofu first: %s %v", got, err)
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
