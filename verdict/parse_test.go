package verdict_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/verdict"
)

// script output in ReadScript's framing; each section is name, exit status, stderr, body.
func framed(sections ...[4]string) []byte {
	var b strings.Builder
	b.WriteString("##switchyard-verdict v1\n")
	for _, s := range sections {
		b.WriteString("##switchyard-verdict begin " + s[0] + "\n" + s[3] + "\n")
		if s[1] != "" { // "" leaves the section cut short
			b.WriteString("##switchyard-verdict end " + s[0] + " " + s[1] + " " + s[2] + "\n")
		}
	}
	return []byte(b.String())
}

func TestParseSampleSections(t *testing.T) {
	at := time.Unix(1796013566, 0)
	units := "Result=success\nId=a.service\nLoadState=loaded\nActiveState=active\nSubState=running\nNRestarts=2\n" +
		"Environment=\"A=b c\" DEPLOY_LOOP_BUDGET=30\nActiveEnterTimestamp=@1796013560\nActiveExitTimestamp=\n" +
		"ConditionResult=yes\nConditionTimestamp=@1796013559\nInvocationID=abc\nExecMainCode=0\nExecMainStatus=0\n\n" +
		"Id=b.target\nActiveState=inactive\nLoadState=loaded\n\n"
	out := framed(
		[4]string{"clock", "0", "", "1796013566"},
		[4]string{"current", "0", "", "/nix/store/x-system"},
		[4]string{"activated", "0", "", "1796013500"},
		[4]string{"boot", "0", "", ""},
		[4]string{"manager", "0", "", "NJobs=1\nSystemState=starting"},
		[4]string{"jobs", "0", "", "2739 waiter.service start waiting\n2689 slow.service   start running"},
		[4]string{"units", "0", "", units},
	)
	got, err := verdict.ParseSample(out, at)
	if err != nil {
		t.Fatal(err)
	}
	want := verdict.Sample{
		At: at, NodeNow: 1796013566, CurrentSystem: "/nix/store/x-system", Activated: 1796013500, SystemState: "starting",
		Jobs: []verdict.Job{{ID: 2739, Unit: "waiter.service", Type: "start", Stat: "waiting"}, {ID: 2689, Unit: "slow.service", Type: "start", Stat: "running"}},
		Units: map[string]verdict.Unit{
			"a.service": {Full: true, Name: "a.service", LoadState: "loaded", ActiveState: "active", SubState: "running", Result: "success",
				NRestarts: 2, InvocationID: "abc", ConditionResult: "yes", ConditionAt: 1796013559, ActiveEnter: 1796013560,
				Environment: []string{"A=b c", "DEPLOY_LOOP_BUDGET=30"}},
			"b.target": {Full: true, Name: "b.target", LoadState: "loaded", ActiveState: "inactive"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSample (-want +got):\n%s", diff)
	}
}

// framedV2 is framed with the v2 header (the cheap view and the units read in full).
func framedV2(sections ...[4]string) []byte {
	return append([]byte("##switchyard-verdict v2\n"), framed(sections...)[len("##switchyard-verdict v1\n"):]...)
}

// TestParseSampleCheapView: every listed unit has its cheap view; the units read
// in full have every field and keep their exported invocation; a unit only listed
// has nothing else; the sample's units are not read unless all three sections were.
func TestParseSampleCheapView(t *testing.T) {
	list := "a.service loaded active running A service\nb.timer loaded active waiting B timer\n" +
		"c.service loaded inactive dead C\nghost.service not-found inactive dead ghost.service"
	inv := "invocation:a.service 11aa\ninvocation:c.service 33cc"
	units := "Id=a.service\nLoadState=loaded\nActiveState=active\nSubState=running\nNRestarts=2\nInvocationID=11aa\n"
	base := [][4]string{{"clock", "0", "", "1796013566"}, {"manager", "0", "", "SystemState=running"}, {"jobs", "0", "", ""}}
	got, err := verdict.ParseSample(framedV2(append(base, [4]string{"list", "0", "", list}, [4]string{"invocations", "0", "", inv},
		[4]string{"units", "0", "", units})...), time.Unix(1796013566, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]verdict.Unit{
		"a.service": {Listed: true, Full: true, ExportedInvocation: "11aa", Name: "a.service", LoadState: "loaded",
			ActiveState: "active", SubState: "running", NRestarts: 2, InvocationID: "11aa"},
		"b.timer":       {Listed: true, Name: "b.timer", LoadState: "loaded", ActiveState: "active", SubState: "waiting"},
		"c.service":     {Listed: true, ExportedInvocation: "33cc", Name: "c.service", LoadState: "loaded", ActiveState: "inactive", SubState: "dead"},
		"ghost.service": {Listed: true, Name: "ghost.service", LoadState: "not-found", ActiveState: "inactive", SubState: "dead"},
	}
	if diff := cmp.Diff(want, got.Units); diff != "" {
		t.Errorf("Units (-want +got):\n%s", diff)
	}
	for _, broken := range [][4]string{
		{"units", "1", "Failed to connect to bus", ""}, {"invocations", "1", "find: not found", ""}, {"list", "", "", list},
	} {
		secs := append(slices.Clone(base), [4]string{"list", "0", "", list}, [4]string{"invocations", "0", "", inv}, [4]string{"units", "0", "", units})
		for i := range secs {
			if secs[i][0] == broken[0] {
				secs[i] = broken
			}
		}
		if broken[0] == "list" { // cut short: the last section
			secs = append(secs[:3], secs[4:]...)
			secs = append(secs, broken)
		}
		got, err := verdict.ParseSample(framedV2(secs...), time.Time{})
		if err != nil || got.Units != nil || len(got.Unread) == 0 {
			t.Errorf("%s not read: err %v, %d units (nil %v), unread %q", broken[0], err, len(got.Units), got.Units == nil, got.Unread)
		}
	}
}

// A section whose command failed or was cut short is not read, never read as empty.
func TestParseSampleNotRead(t *testing.T) {
	bus := "Failed to connect to bus: Connection refused"
	out := framed(
		[4]string{"clock", "0", "", "1796013566"},
		[4]string{"manager", "1", bus, ""},
		[4]string{"jobs", "0", "", ""},
		[4]string{"units", "", "", "Id=a.service\nLoadState=loaded"}, // cut short
	)
	got, err := verdict.ParseSample(out, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got.SystemState != "" || got.Units != nil {
		t.Errorf("SystemState %q, Units %v: want not read", got.SystemState, got.Units)
	}
	if got.Jobs == nil || len(got.Jobs) != 0 {
		t.Errorf("Jobs = %#v, want read and empty", got.Jobs)
	}
	want := []string{"current: missing", "activated: missing", "boot: missing", "manager: exit 1: " + bus, "units: cut short"}
	if diff := cmp.Diff(want, got.Unread); diff != "" {
		t.Errorf("Unread (-want +got):\n%s", diff)
	}
}

func TestParseSampleNotScriptOutput(t *testing.T) {
	for _, out := range []string{"", "sudo: a password is required\n", "##switchyard-verdict v3\n"} {
		if _, err := verdict.ParseSample([]byte(out), time.Time{}); !errors.Is(err, verdict.ErrNotScriptOutput) {
			t.Errorf("ParseSample(%q) err = %v, want ErrNotScriptOutput", out, err)
		}
	}
}

func TestRead(t *testing.T) {
	healthy, err := os.ReadFile(filepath.Join("testdata", "healthy", "00.txt"))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	exec := func(out []byte, exit int, err error) verdict.Exec {
		return func(ctx context.Context, argv []string, stdout io.Writer) (int, error) {
			calls++
			if len(argv) != 5 || argv[0] != "sh" || argv[1] != "-c" || argv[2] != verdict.ReadScript || argv[3] != "sh" || argv[4] != verdict.AllUnits {
				t.Errorf("argv = %q, want sh -c ReadScript sh '*'", argv[:min(len(argv), 2)])
			}
			_, _ = stdout.Write(out)
			return exit, err
		}
	}

	s, err := verdict.Read(context.Background(), exec(healthy, 0, nil))
	if err != nil || s.SystemState != "running" || len(s.Units) < 100 || calls != 1 {
		t.Errorf("Read: err %v, state %q, %d units, %d execs", err, s.SystemState, len(s.Units), calls)
	}

	gone := errors.New("connection reset by peer")
	if s, err := verdict.Read(context.Background(), exec(nil, -1, gone)); !errors.Is(err, gone) || s.Units != nil || s.At.IsZero() {
		t.Errorf("Read with a failed exec: err %v, units %v, at %v", err, s.Units, s.At)
	}
	if _, err := verdict.Read(context.Background(), exec([]byte("sh: not found\n"), 127, nil)); !errors.Is(err, verdict.ErrNotScriptOutput) {
		t.Errorf("Read when the script never ran: err %v", err)
	}
	cut := healthy[:len(healthy)/2]
	s, err = verdict.Read(context.Background(), exec(cut, 255, nil))
	if err != nil || s.Units != nil || s.SystemState != "running" {
		t.Errorf("Read cut short: err %v, units %d (nil %v), state %q", err, len(s.Units), s.Units == nil, s.SystemState)
	}
	if !strings.Contains(strings.Join(s.Unread, "\n"), "script: exit 255") {
		t.Errorf("Unread = %q, want the script's exit status", s.Unread)
	}
}
