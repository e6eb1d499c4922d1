package testbed

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// testbed/closures/NG.md lists what the test closures model of NixOS's
// switch-to-configuration-ng (issue 32 item 3): every row is "modelled", naming a
// test of the repository that exercises it, or "not modelled", saying why. A row
// whose test was renamed or removed fails here.
func TestNGTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("closures", "NG.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests := testFuncs(t, "..")
	rows, modelled := 0, 0
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "|") || len(cells) != 3 || cells[1] == "status" || strings.HasPrefix(cells[1], "-") {
			continue
		}
		rows++
		switch status, ref := cells[1], strings.TrimSpace(cells[2]); status {
		case "modelled":
			modelled++
			if !tests[ref] {
				t.Errorf("%q: modelled, but no test %s in the repository", cells[0], ref)
			}
		case "not modelled":
			if len(ref) < 20 {
				t.Errorf("%q: not modelled, and no reason given (%q)", cells[0], ref)
			}
		default:
			t.Errorf("%q: status %q, want modelled or not modelled", cells[0], status)
		}
	}
	if rows < 15 || modelled == 0 {
		t.Errorf("the table has %d rows, %d modelled: it was not read", rows, modelled)
	}
}

var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)

// testFuncs are the names of the Test functions under root.
func testFuncs(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
