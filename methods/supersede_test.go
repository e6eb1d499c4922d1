package methods

import (
	"strings"
	"testing"
)

// TestApplied: a signed submission found before the last on one of the run's groups
// is superseded; the current one and a new one are not; recording moves one applied
// again to the end, each once.
func TestApplied(t *testing.T) {
	a := applied{}
	a.record([]string{"web", "db"}, "s1")
	a.record([]string{"web"}, "s2")
	alice := func(sha string) signed { return signed{Principal: "alice", SubmissionSHA256: sha} }
	if err := a.superseded([]string{"web"}, alice("s1")); err == nil || !strings.Contains(err.Error(), "applied to group web before and has since been superseded by 1 other") {
		t.Errorf("s1 on web: %v", err)
	}
	for _, c := range []struct {
		groups []string
		s      signed
	}{
		{[]string{"db"}, alice("s1")}, {[]string{"web"}, alice("s2")}, {[]string{"web", "db"}, alice("s3")},
		{[]string{"web"}, signed{SubmissionSHA256: "s1"}}, // unsigned: the deployer's own
	} {
		if err := a.superseded(c.groups, c.s); err != nil {
			t.Errorf("%v on %v: %v", c.s, c.groups, err)
		}
	}
	a.record([]string{"web"}, "s1")
	if got := strings.Join(a["web"], ","); got != "s2,s1" {
		t.Errorf("web after s1 again: %s", got)
	}
	dir := t.TempDir()
	if err := writeApplied(dir, []string{"web", "db"}, a); err != nil {
		t.Fatal(err)
	}
	back, err := readApplied(dir, []string{"web", "db", "new"})
	if err != nil || strings.Join(back["web"], ",") != "s2,s1" || strings.Join(back["db"], ",") != "s1" || len(back["new"]) != 0 {
		t.Errorf("read back %v, %v", back, err)
	}
}

// TestCheckScope: without scopes every signer may submit for every group; with
// them, a signer only for its groups (any of a line's principals), and an unsigned
// submission is not scoped.
func TestCheckScope(t *testing.T) {
	scopes := map[string][]string{"alice@x": {"web"}, "bob@x": {"db"}}
	for _, c := range []struct {
		scopes    map[string][]string
		principal string
		groups    []string
		refused   string
	}{
		{nil, "mallory@x", []string{"web"}, ""},
		{scopes, "alice@x", []string{"web"}, ""},
		{scopes, "alice@x", []string{"web", "db"}, "alice@x may not submit for group db (submissions.scopes)"},
		{scopes, "alice@x,bob@x", []string{"web", "db"}, ""},
		{scopes, "mallory@x", []string{"web"}, "mallory@x may not submit for group web"},
		{scopes, "", []string{"web"}, ""},
	} {
		err := checkScope(c.scopes, signed{Principal: c.principal}, c.groups)
		if (c.refused == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), c.refused) || exitFor(err) != ExitRefused)) {
			t.Errorf("%s on %v: %v, want %q", c.principal, c.groups, err, c.refused)
		}
	}
}
