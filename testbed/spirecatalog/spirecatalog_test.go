package spirecatalog

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// catalogFile has the shape of SPIRE v1.13.3's pkg/server/catalog/upstreamauthority.go
// (read in the module the Go proxy serves): an import of the kind's interface package,
// one import per built-in (one of them renamed), and BuiltIns() listing each.
const catalogFile = `package catalog

import (
	"github.com/spiffe/spire/pkg/common/catalog"
	"github.com/spiffe/spire/pkg/server/plugin/upstreamauthority"
	"github.com/spiffe/spire/pkg/server/plugin/upstreamauthority/awspca"
	"github.com/spiffe/spire/pkg/server/plugin/upstreamauthority/disk"
	spireplugin "github.com/spiffe/spire/pkg/server/plugin/upstreamauthority/spire"
)

type upstreamAuthorityRepository struct {
	upstreamauthority.Repository
}

func (repo *upstreamAuthorityRepository) BuiltIns() []catalog.BuiltIn {
	return []catalog.BuiltIn{
		awspca.BuiltIn(),
		spireplugin.BuiltIn(),
		disk.BuiltIn(),
	}
}
`

func TestPrune(t *testing.T) {
	out, dropped, err := Prune("upstreamauthority.go", []byte(catalogFile), Kept)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"upstreamauthority/awspca", "upstreamauthority/spire"}; !reflect.DeepEqual(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	got := string(out)
	for _, gone := range []string{"awspca", "spireplugin", "upstreamauthority/spire\""} {
		if strings.Contains(got, gone) {
			t.Errorf("%q is still in the pruned file:\n%s", gone, got)
		}
	}
	for _, stays := range []string{`"github.com/spiffe/spire/pkg/server/plugin/upstreamauthority"`, `upstreamauthority/disk"`, "disk.BuiltIn(),", "upstreamauthority.Repository"} {
		if !strings.Contains(got, stays) {
			t.Errorf("%q is missing from the pruned file:\n%s", stays, got)
		}
	}
}

func TestPruneRefusesAnotherUse(t *testing.T) {
	src := strings.Replace(catalogFile, "type upstreamAuthorityRepository", "var _ = awspca.New\n\ntype upstreamAuthorityRepository", 1)
	if _, _, err := Prune("upstreamauthority.go", []byte(src), Kept); err == nil || !strings.Contains(err.Error(), "awspca.New") {
		t.Fatalf("err = %v, want one naming awspca.New", err)
	}
}

func TestPruneDirNeedsACatalog(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "other.go"), []byte("package other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := PruneDir(dir, Kept); err == nil {
		t.Fatal("a directory without built-in plugins pruned without an error")
	}
	if err := os.WriteFile(filepath.Join(dir, "upstreamauthority.go"), []byte(catalogFile), 0o644); err != nil {
		t.Fatal(err)
	}
	dropped, err := PruneDir(dir, Kept)
	if err != nil || len(dropped) != 2 {
		t.Fatalf("PruneDir = %v, %v; want two plugins dropped", dropped, err)
	}
}
