package effects

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// unitNameFromPath gives what systemd-escape --path gave on a test-bed node.
func TestUnitNameFromPathGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "fstab", "escape.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []escapeCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("empty golden")
	}
	for _, c := range cases {
		if c.OK && len(c.Unit) >= unitNameMax {
			// systemd-escape prints it; the manager and the fstab generator hash a
			// name this long, which unitNameFromPath does not derive.
			c.Unit, c.OK = "", false
		}
		unit, ok := unitNameFromPath(c.Path, c.Suffix)
		if unit != c.Unit || ok != c.OK {
			t.Errorf("unitNameFromPath(%q, %q) = %q, %v; systemd-escape said %q, %v", c.Path, c.Suffix, unit, ok, c.Unit, c.OK)
		}
	}
}

// fstabUnits names the units systemd-fstab-generator made from testdata/fstab/fstab on
// a test-bed node. The generator ignores swap entries in a container, so the swap
// unit is checked apart (its name is the escape golden's).
func TestFstabUnitsGolden(t *testing.T) {
	dir := filepath.Join("testdata", "fstab")
	fstab, err := os.ReadFile(filepath.Join(dir, "fstab"))
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile(filepath.Join(dir, "units.golden"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(golden))
	var got []string
	var swaps []string
	for _, u := range fstabUnits(string(fstab)) {
		if strings.HasSuffix(u, ".swap") {
			swaps = append(swaps, u)
			continue
		}
		got = append(got, u)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("units from %s (-systemd-fstab-generator +fstabUnits):\n%s", filepath.Join(dir, "fstab"), diff)
	}
	if diff := cmp.Diff([]string{`dev-disk-by\x2dlabel-swap.swap`}, swaps); diff != "" {
		t.Errorf("swap units (-want +got):\n%s", diff)
	}
}

func TestFstabUnits(t *testing.T) {
	tests := []struct {
		name, fstab string
		want        []string
	}{
		{"empty", "", nil},
		{"only comments", "# generated\n\n  # nothing\n", nil},
		{"NixOS root, data and swap file", "/dev/disk/by-label/nixos / ext4 defaults 0 1\n/dev/sdb1 /mnt/data xfs nofail 0 2\n/swapfile none swap defaults 0 0\n",
			[]string{"-.mount", "mnt-data.mount", "swapfile.swap"}},
		{"swap by label and uuid", "LABEL=my-swap none swap\nUUID=0a1b-2c3d swap swap sw 0 0\n",
			[]string{`dev-disk-by\x2dlabel-my\x2dswap.swap`, `dev-disk-by\x2duuid-0a1b\x2d2c3d.swap`}},
		{"a label with a space is escaped twice, as udev and systemd do", "LABEL=\"my\\040swap\" none swap\n",
			[]string{`dev-disk-by\x2dlabel-my\x5cx20swap.swap`}},
		{"automount, not for the root", "tmpfs / tmpfs x-systemd.automount\nsrv:/h /home nfs x-systemd.automount\n",
			[]string{"-.mount", "home.mount", "home.automount"}},
		{"no unit: autofs, relative, API, '..'", "m /a autofs\ntmpfs rel/dir tmpfs\nproc /proc proc\ntmpfs /a/../b tmpfs\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fstabUnits(tc.fstab)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// splitOwned reads only a complete OwnedScript output, and names the part a cut-short
// one stopped in.
func TestSplitOwned(t *testing.T) {
	cases := []struct {
		name, out           string
		units, fstab, stuck string
		ok                  bool
	}{
		{"complete", "##switchyard-owned units\nf a.service\n##switchyard-owned fstab\n/dev/x / ext4\n\n##switchyard-owned end\n", "f a.service\n", "/dev/x / ext4\n", "", true},
		{"empty parts", "##switchyard-owned units\n##switchyard-owned fstab\n\n##switchyard-owned end\n", "", "", "", true},
		{"nothing", "", "", "", "", false},
		{"stopped in the units", "##switchyard-owned units\nf a.service\n", "", "", "units", false},
		{"stopped in the fstab", "##switchyard-owned units\n##switchyard-owned fstab\n/dev/x / ext4\n", "", "", "fstab", false},
	}
	for _, c := range cases {
		units, fstab, stuck, ok := splitOwned(c.out)
		if units != c.units || fstab != c.fstab || stuck != c.stuck || ok != c.ok {
			t.Errorf("%s: splitOwned = %q, %q, %q, %v; want %q, %q, %q, %v", c.name, units, fstab, stuck, ok, c.units, c.fstab, c.stuck, c.ok)
		}
	}
}
