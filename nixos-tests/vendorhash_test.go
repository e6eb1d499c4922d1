package nixostests

import (
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// vendorHashLine is flake.nix's one vendorHash attribute.
var vendorHashLine = regexp.MustCompile(`(?m)^\s*vendorHash\s*=\s*("[^"]*"|null)\s*;`)

// TestVendorHashMatchesGoModules recomputes the package's vendorHash the way nixpkgs'
// buildGoModule does (its goModules derivation runs `go mod vendor` over the source and
// its fixed output is the vendor directory, compared as a NAR SHA-256 in SRI form) and
// fails when flake.nix holds another value: a change of go.mod, go.sum or of the
// packages the module imports then breaks the test command, never the first user's
// `nix run`.
//
// It needs the Go module proxy (or a filled module cache) and Nix's nix-hash, so it runs
// in the test command (SWITCHYARD_TESTBED=require) and when SWITCHYARD_VENDORHASH=1, and
// skips elsewhere: inside the Nix build's check phase the sources are already vendored
// and there is no network.
func TestVendorHashMatchesGoModules(t *testing.T) {
	if os.Getenv("SWITCHYARD_TESTBED") != "require" && os.Getenv("SWITCHYARD_VENDORHASH") != "1" {
		t.Skip("recomputing vendorHash needs the module proxy: set SWITCHYARD_VENDORHASH=1 (the test command does)")
	}
	nixHash := nixTool(t, "nix-hash")
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	root := testbed.RepoRoot()

	flake, err := os.ReadFile(filepath.Join(root, "flake.nix"))
	if err != nil {
		t.Fatal(err)
	}
	m := vendorHashLine.FindAllSubmatch(flake, -1)
	if len(m) != 1 {
		t.Fatalf("flake.nix has %d vendorHash attributes, want exactly 1", len(m))
	}
	got := strings.Trim(string(m[0][1]), `"`)

	want := vendorHash(t, goTool, nixHash, root)
	if got != want {
		t.Errorf("flake.nix vendorHash = %s, but `go mod vendor` of this tree hashes to %s: "+
			"set vendorHash = %q; (go.mod, go.sum or the imported packages changed)", got, want, want)
	}
}

// vendorHash is the SRI NAR hash of `go mod vendor` of the module at root, written into
// a scratch directory so the work tree is never touched.
func vendorHash(t *testing.T, goTool, nixHash, root string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vendor")
	cmd := exec.Command(goTool, "mod", "vendor", "-o", dir)
	cmd.Dir = root
	// As buildGoModule's goModules derivation: modules resolved from go.mod/go.sum, no
	// workspace, no toolchain switch.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go mod vendor: %v\n%s", err, out)
	}
	out, err := exec.Command(nixHash, "--type", "sha256", dir).Output()
	if err != nil {
		t.Fatalf("nix-hash --type sha256 %s: %v", dir, err)
	}
	return sriSHA256(t, strings.TrimSpace(string(out)))
}

// sriSHA256 turns nix-hash's hexadecimal SHA-256 into the SRI form Nix compares
// vendorHash in (Nix 2.8's nix-hash has no --sri).
func sriSHA256(t *testing.T, hexHash string) string {
	t.Helper()
	raw, err := hex.DecodeString(hexHash)
	if err != nil || len(raw) != 32 {
		t.Fatalf("nix-hash printed %q, not a hexadecimal SHA-256", hexHash)
	}
	return "sha256-" + base64.StdEncoding.EncodeToString(raw)
}

func TestSRISHA256(t *testing.T) {
	// SHA-256 of the empty string, in both forms (the SRI as Nix prints it).
	const hexHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	if got, want := sriSHA256(t, hexHash), "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="; got != want {
		t.Errorf("sriSHA256 = %s, want %s", got, want)
	}
}
