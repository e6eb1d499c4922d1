package testbed

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// cpuParts reads the container's, sshd's and PID 1's cpu.stat (values as a node's
// were read on the test bed); a node with NixOS's sshd.service is read too, and one
// with no ssh service is not.
func TestCPUParts(t *testing.T) {
	stat := func(usec string) string {
		return "usage_usec " + usec + "\nuser_usec 743313\nsystem_usec 830518\nnice_usec 0\n"
	}
	for _, tc := range []struct {
		unit string
		ok   bool
	}{{"ssh.service", true}, {"sshd.service", true}, {"", false}} {
		root := t.TempDir()
		files := map[string]string{"": "4194707", "init.scope": "529000", "system.slice/systemd-journald.service": "88000"}
		if tc.unit != "" {
			files["system.slice/"+tc.unit] = "1573832"
		}
		for dir, usec := range files {
			if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, dir, "cpu.stat"), []byte(stat(usec)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p, ok := cpuParts(root)
		want := CPUParts{All: 4194707 * time.Microsecond, SSH: 1573832 * time.Microsecond, PID1: 529 * time.Millisecond}
		if !tc.ok {
			want = CPUParts{}
		}
		if ok != tc.ok || p != want {
			t.Errorf("%q: cpuParts = %+v, %v; want %+v, %v", tc.unit, p, ok, want, tc.ok)
		}
		if ok && p.Rest() != (4194707-1573832-529000)*time.Microsecond {
			t.Errorf("%q: Rest = %s", tc.unit, p.Rest())
		}
	}
}
