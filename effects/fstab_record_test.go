package effects

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// recordFstab re-records testdata/fstab/ from a live test-bed node (systemd 252):
//
//	SWITCHYARD_TESTBED=require go test ./effects -run TestRecordFstab -record-fstab
var recordFstab = flag.Bool("record-fstab", false, "record testdata/fstab/ goldens from a live test-bed node")

// escapeCase is one `systemd-escape --path --suffix=<suffix> -- <path>` run on a node:
// its output, or ok false when systemd refused the path.
type escapeCase struct {
	Path   string `json:"path"`
	Suffix string `json:"suffix"`
	Unit   string `json:"unit"`
	OK     bool   `json:"ok"`
}

// escapePaths are the mount points and swap devices the escape golden is recorded for.
var escapePaths = []string{
	"/", "//", "/mnt/data", "/mnt/data/", "//mnt//data", "/srv/my-dir", "/mnt/with space", "/.hidden/x", "/mnt/.dot",
	"/a/./b", "/a/../b", "/..", `/var/lib/back\slash`, "/x:y_z.w", "/ünïcödé", "/a+b@c~d%e", "/tab\tx", "/new\nline",
	"/run/wrappers", "/nix/.ro-store", "/dev/disk/by-label/swap", "/dev/disk/by-uuid/0a1b-2c3d", "/swapfile",
	"/" + strings.Repeat("a", 248), "/" + strings.Repeat("a", 249), "/" + strings.Repeat("a", 250),
	"/" + strings.Repeat("a", 251), "/" + strings.Repeat("é", 60), "/b/" + strings.Repeat("a", 255), "/b/" + strings.Repeat("a", 256),
}

func TestRecordFstab(t *testing.T) {
	if !*recordFstab {
		t.Skip("run with -record-fstab to re-record testdata/fstab from a test-bed node")
	}
	node := testbed.Require(t).Node(t)
	dir := filepath.Join("testdata", "fstab")
	fstab, err := os.ReadFile(filepath.Join(dir, "fstab"))
	if err != nil {
		t.Fatal(err)
	}
	// The generator reads $SYSTEMD_FSTAB instead of /etc/fstab, and writes its units to
	// the three output directories it is given; cd / as systemd runs it.
	out := node.MustExec(t, "sh", "-c", `printf '%s' "$1" >/tmp/fstab.golden && rm -rf /tmp/gen && mkdir /tmp/gen && cd / &&
		SYSTEMD_FSTAB=/tmp/fstab.golden /lib/systemd/system-generators/systemd-fstab-generator /tmp/gen /tmp/gen /tmp/gen 2>/dev/null; ls -1 /tmp/gen`,
		"sh", string(fstab))
	var units []string
	for _, name := range strings.Split(out, "\n") {
		if strings.HasSuffix(name, ".mount") || strings.HasSuffix(name, ".automount") || strings.HasSuffix(name, ".swap") {
			units = append(units, name)
		}
	}
	slices.Sort(units)
	if err := os.WriteFile(filepath.Join(dir, "units.golden"), []byte(strings.Join(units, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var cases []escapeCase
	for _, p := range escapePaths {
		for _, suffix := range []string{".mount", ".swap"} {
			// A fixed script: the path and suffix are its arguments, never its text.
			out := node.MustExec(t, "sh", "-c", `systemd-escape --path --suffix="${1#.}" -- "$2" 2>/dev/null || echo '!refused'`, "sh", suffix, p)
			unit := strings.TrimSuffix(out, "\n")
			c := escapeCase{Path: p, Suffix: suffix, Unit: unit, OK: unit != "!refused"}
			if !c.OK {
				c.Unit = ""
			}
			cases = append(cases, c)
		}
	}
	b, err := json.MarshalIndent(cases, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "escape.golden.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
