package rollout

import (
	"fmt"
	"strings"
	"testing"
)

// Staged rollouts (issue 14 item 2): the spec's syntax and the stages it makes.

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
	}{
		{"", Spec{}},
		{"  ", Spec{}},
		{"canary=1,batch=2", Spec{Canary: 1, Batch: 2, set: true}},
		{"batch=2,canary=1", Spec{Canary: 1, Batch: 2, set: true}},
		{"canary=0,batch=25%", Spec{Batch: 25, Percent: true, set: true}},
		{"canary=2", Spec{Canary: 2, set: true}},
		{"batch=100%", Spec{Batch: 100, Percent: true, set: true}},
		{" canary=1 , batch=1 ", Spec{Canary: 1, Batch: 1, set: true}},
	} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("Parse(%q.String() = %q) = %+v, %v", tc.in, got.String(), again, err)
		}
	}
	for _, in := range []string{
		"canary", "canary=-1", "canary=x", "batch=0", "batch=-2", "batch=0%", "batch=101%", "batch=%",
		"batch=2,batch=3", "wave=2", "canary=1,", "canary=1;batch=2",
	} {
		got, err := Parse(in)
		if err == nil || got.Enabled() {
			t.Errorf("Parse(%q) = %+v, %v; want an error", in, got, err)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q): %q is more than one line", in, err)
		}
	}
}

func names(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("web%d", i))
	}
	return out
}

func all(nodes []string) map[string]bool {
	m := map[string]bool{}
	for _, n := range nodes {
		m[n] = true
	}
	return m
}

func TestStages(t *testing.T) {
	six := names(6)
	someUnchanged := all(six)
	someUnchanged["web2"], someUnchanged["web5"] = false, false
	for _, tc := range []struct {
		name    string
		nodes   []string
		changed map[string]bool
		spec    string
		want    string
	}{
		{"no rollout: one stage", six, all(six), "", "1[web1 web2 web3 web4 web5 web6]"},
		{"canary and batches of 2", six, all(six), "canary=1,batch=2",
			"0[web1] 1[web2 web3] 2[web4 web5] 3[web6]"},
		{"no canary", six, all(six), "canary=0,batch=3", "1[web1 web2 web3] 2[web4 web5 web6]"},
		{"canary, the rest at once", six, all(six), "canary=2", "0[web1 web2] 1[web3 web4 web5 web6]"},
		{"a percentage of the nodes after the canary, rounded up", six, all(six), "canary=1,batch=25%",
			"0[web1] 1[web2 web3] 2[web4 web5] 3[web6]"},
		{"a small percentage is still one node", names(3), all(names(3)), "canary=0,batch=1%",
			"1[web1] 2[web2] 3[web3]"},
		{"unchanged nodes don't count and go first", six, someUnchanged, "canary=1,batch=2",
			"0[web1 web2 web5] 1[web3 web4] 2[web6]"},
		{"an unchanged first node: the canary is the first changed one", six, map[string]bool{"web3": true, "web4": true},
			"canary=1,batch=1", "0[web1 web2 web3 web5 web6] 1[web4]"},
		{"nothing changed: one stage", six, nil, "canary=1,batch=2", "1[web1 web2 web3 web4 web5 web6]"},
		{"a canary larger than the fleet", names(2), all(names(2)), "canary=5,batch=1", "0[web1 web2]"},
	} {
		spec, err := Parse(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range Stages(tc.nodes, tc.changed, spec) {
			got = append(got, fmt.Sprintf("%d%v", s.Batch, s.Nodes))
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, strings.Join(got, " "), tc.want)
		}
	}
}

func TestFailedAndHeldReason(t *testing.T) {
	s := Stage{Batch: 2, Nodes: []string{"web4", "web5"}}
	if f := Failed(s, map[string]int{"web4": 0, "web5": 0, "web1": 1}); len(f) != 0 {
		t.Errorf("a passed stage failed: %v", f)
	}
	f := Failed(s, map[string]int{"web4": 0, "web5": 1})
	if got := HeldReason(s, f); got != "held: the rollout stopped at batch 2 (web5 failed)" {
		t.Errorf("reason %q", got)
	}
	if got := HeldReason(Stage{Nodes: []string{"web1"}}, []string{"web1"}); got != "held: the rollout stopped at the canary (web1 failed)" {
		t.Errorf("reason %q", got)
	}
}
