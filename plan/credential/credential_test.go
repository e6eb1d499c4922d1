package credential

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDirs(t *testing.T) {
	env := map[string]string{DirsVar: "/run/api/a:/var/lib/api/b/", SystemdVar: "/run/credentials/switchyard.service"}
	got, err := Dirs([]string{"/srv/creds"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/srv/creds", "/run/api/a", "/var/lib/api/b", "/run/credentials/switchyard.service"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	for _, bad := range []map[string]string{{DirsVar: "/run/a:relative"}, {DirsVar: "/run/a::/run/b"}, {SystemdVar: "/"}} {
		if _, err := Dirs(nil, func(k string) string { return bad[k] }); err == nil || !strings.Contains(err.Error(), "not an absolute directory") {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
