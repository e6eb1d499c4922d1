package verdict

import (
	"strings"
	"testing"
)

func TestDisagree(t *testing.T) {
	const a, b = "/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-nixos-system-web1", "/nix/store/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-nixos-system-web1"
	agree := NodeStatus{Expected: StatusExpected{Toplevel: a},
		Present: StatusPresent{Reachable: true, Running: a, Profile: a, BootEntry: a, Receipt: "r.json", ReceiptToplevel: a},
		Ready:   StatusReady{Source: "fresh", OK: true}}
	with := func(f func(*NodeStatus)) NodeStatus { s := agree; f(&s); return s }
	for _, c := range []struct {
		name string
		s    NodeStatus
		want []string // a part of each disagreement, in order
	}{
		{"all agree", agree, nil},
		{"unreachable: nothing else said", with(func(s *NodeStatus) { s.Present = StatusPresent{} }), []string{"unreachable"}},
		{"drift", with(func(s *NodeStatus) { s.Expected.Toplevel = b }), []string{"drift: runs " + a + ", the plan expects " + b}},
		{"not evaluated", with(func(s *NodeStatus) { s.Expected.Toplevel = "" }), []string{"evaluation failed"}},
		{"profile and boot entry elsewhere (apply --mode test)", with(func(s *NodeStatus) { s.Present.Profile, s.Present.BootEntry = b, b }),
			[]string{"system profile is " + b, "boot entry boots " + b}},
		{"no boot entry read", with(func(s *NodeStatus) { s.Present.BootEntry = "" }), []string{"boot entry boots <none>"}},
		{"a generation no receipt names", with(func(s *NodeStatus) { s.Present.ReceiptToplevel = b }), []string{"no receipt names (the last, r.json, names " + b}},
		{"never applied", with(func(s *NodeStatus) { s.Present.Receipt, s.Present.ReceiptToplevel = "", "" }), []string{"no receipt"}},
		{"failed verdict", with(func(s *NodeStatus) {
			s.Ready = StatusReady{Source: "cached", ExitCode: 1, Reasons: []string{"1 failed unit"}}
		}),
			[]string{"cached verdict failed (exit 1): 1 failed unit"}},
		{"no verdict", with(func(s *NodeStatus) { s.Ready = StatusReady{Source: "none"} }), []string{"no verdict"}},
	} {
		got := Disagree(c.s)
		if len(got) != len(c.want) {
			t.Errorf("%s: %q, want %d disagreements", c.name, got, len(c.want))
			continue
		}
		for i := range got {
			if !strings.Contains(got[i], c.want[i]) {
				t.Errorf("%s: %q, want %q in it", c.name, got[i], c.want[i])
			}
		}
	}
}

func TestStatusTable(t *testing.T) {
	var b strings.Builder
	rows := []NodeStatus{{Node: "web1", OK: true, Expected: StatusExpected{Toplevel: "/nix/store/aaaaaaaabbbb-x"},
		Present: StatusPresent{Reachable: true, Running: "/nix/store/aaaaaaaabbbb-x"}, Ready: StatusReady{Source: "fresh", OK: true}},
		{Node: "web2", Present: StatusPresent{}, Ready: StatusReady{Source: "none"}, Disagreements: []string{"unreachable"}}}
	if err := WriteStatusTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	want := "NODE  EXPECTED  RUNNING   PROFILE  BOOT  RECEIPT  READY       STATUS\n" +
		"web1  aaaaaaaa  aaaaaaaa  -        -     -        ok (fresh)  ok\n" +
		"web2  -         -         -        -     -        none        1 disagreement\n" +
		"web2: unreachable\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}
