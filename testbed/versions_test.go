package testbed

import (
	"os/exec"
	"strings"
	"testing"
)

// The Go side reads the pins the scripts source, value for value.
func TestPin(t *testing.T) {
	for tool, want := range map[string]string{"go": "1.26.8", "check_go": "1.26.0", "tofu": "1.10.6",
		"spire": "1.13.3", "staticcheck": "v0.8.2"} {
		if got := Pin(tool); got != want {
			t.Errorf("Pin(%q) = %q, want %q (versions.sh changed: change this table with it)", tool, got, want)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	out, err := exec.Command(bash, "-c", `. ./versions.sh && echo "$switchyard_tofu_version $switchyard_spire_version"`).Output()
	if err != nil || strings.TrimSpace(string(out)) != Pin("tofu")+" "+Pin("spire") {
		t.Errorf("bash reads versions.sh as %q (%v), Go as %s %s", out, err, Pin("tofu"), Pin("spire"))
	}
	defer func() {
		if recover() == nil {
			t.Error("Pin of a tool not pinned did not panic")
		}
	}()
	Pin("nothing")
}
