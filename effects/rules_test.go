package effects

import (
	"strings"
	"testing"
)

// The body's phases are its own, never a transport's (what each package may
// import is pinned by package layers' test).
func TestPackageRules(t *testing.T) {
	for _, p := range PhaseNames() {
		for _, word := range []string{"ssh", "incus", "shell", "tofu", "scp", "rsync"} {
			if strings.Contains(p, word) {
				t.Errorf("phase %q is named after a transport", p)
			}
		}
	}
}
