package verdict

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitEnvironment(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"DEPLOY_LOOP_BUDGET=30", []string{"DEPLOY_LOOP_BUDGET=30"}},
		// verbatim from systemd 252: systemctl show -p Environment
		{`"A=b c" D=e "Q=x\"y" DEPLOY_LOOP_BUDGET=30`, []string{"A=b c", "D=e", `Q=x"y`, "DEPLOY_LOOP_BUDGET=30"}},
		{`"N=a\tb" "S=it's" "P=\$x"`, []string{"N=a\tb", "S=it's", "P=$x"}},
		{`"X=DEPLOY_LOOP_BUDGET=1 y"`, []string{"X=DEPLOY_LOOP_BUDGET=1 y"}},
		{`$'N=a\nb' 'L=lit\n'`, []string{"N=a\nb", `L=lit\n`}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, splitEnvironment(tc.in)); diff != "" {
			t.Errorf("splitEnvironment(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	if v, ok := envValue([]string{"DEPLOY_LOOP_BUDGET=5", "X=DEPLOY_LOOP_BUDGET=1", "DEPLOY_LOOP_BUDGET=30"}, loopBudgetVar); !ok || v != "30" {
		t.Errorf("envValue = %q, %v; want the last assignment, 30", v, ok)
	}
}

// The statuses SPEC 4.2 names as host spawn faults are host-side, under systemd's
// own names; the closure's own failures are not.
func TestExecStages(t *testing.T) {
	for status, name := range map[int]string{214: "SETSCHEDULER", 219: "CGROUP", 226: "NAMESPACE", 239: "CACHE_DIRECTORY", 242: "NUMA_POLICY", 244: "BPF"} {
		if st := execStages[status]; !st.host || st.name != name {
			t.Errorf("%d = %+v, want host-side %s", status, st, name)
		}
	}
	for _, status := range []int{200, 203, 216, 217, 243} {
		if execStages[status].host {
			t.Errorf("%d/%s counted host-side; it is the closure's", status, execStages[status].name)
		}
	}
	for status, st := range execStages {
		if status < 200 || status > 245 || status == 223 || status == 234 || st.name == "" || strings.ToUpper(st.name) != st.name {
			t.Errorf("bad table entry %d: %+v", status, st)
		}
	}
}
