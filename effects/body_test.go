package effects

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/verdict"
)

// fakeNode is a Transport answering from systemd state recorded on test-bed nodes
// (verdict/testdata): each read of the node returns the next recorded sample.
// Everything else it is asked is logged, so tests can check what the body did.
type fakeNode struct {
	mu          sync.Mutex
	samples     [][]byte
	next        int
	toplevel    string
	owned       []string
	wanted      []string
	switchExit  int
	activates   bool // the switch repoints /run/current-system
	current     string
	unreachable bool
	bootInit    string // what the default boot entry starts (bootEntryScript's answer)
	log         []string
}

func loadFake(t *testing.T, scenario string) *fakeNode {
	t.Helper()
	dir := filepath.Join("..", "verdict", "testdata", scenario)
	raw, err := os.ReadFile(filepath.Join(dir, "recording.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Toplevel   string   `json:"toplevel"`
		SwitchExit int      `json:"switch_exit"`
		Owned      []string `json:"owned"`
		Wanted     []string `json:"wanted"`
		Samples    []struct {
			File string `json:"file"`
		} `json:"samples"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{toplevel: rec.Toplevel, owned: rec.Owned, wanted: rec.Wanted, switchExit: rec.SwitchExit,
		activates: true, current: "/nix/store/00000000000000000000000000000000-nixos-system-previous",
		bootInit: rec.Toplevel + "/init"}
	for _, s := range rec.Samples {
		b, err := os.ReadFile(filepath.Join(dir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		f.samples = append(f.samples, b)
	}
	return f
}

func (f *fakeNode) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *fakeNode) did(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, l := range f.log {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeNode) Target() string { return "fake node" }
func (f *fakeNode) Close() error   { return nil }

func (f *fakeNode) Run(ctx context.Context, c Command) (int, error) {
	if f.unreachable {
		return 0, fmt.Errorf("dial: connection refused: %w", ErrUnreachable)
	}
	out := c.Stdout
	if out == nil {
		out = io.Discard
	}
	argv := strings.Join(c.Argv, " ")
	f.record("run " + argv)
	switch {
	case argv == "systemctl is-system-running":
		fmt.Fprintln(out, "running")
	case len(c.Argv) == 3 && c.Argv[0] == "sh" && c.Argv[2] == verdict.ReadScript:
		f.mu.Lock()
		s := f.samples[min(f.next, len(f.samples)-1)]
		f.next++
		f.mu.Unlock()
		out.Write(s)
	case len(c.Argv) == 3 && c.Argv[0] == "sh" && c.Argv[2] == bootEntryScript:
		fmt.Fprintln(out, f.bootInit)
	case strings.HasPrefix(argv, "systemd-run "):
		if f.activates {
			f.current = f.toplevel
		}
	case strings.HasPrefix(argv, "systemctl show --property=LoadState,ActiveState,Result,ExecMainCode,ExecMainStatus"):
		state := "active"
		if f.switchExit != 0 {
			state = "failed"
		}
		fmt.Fprintf(out, "LoadState=loaded\nActiveState=%s\nResult=success\nExecMainCode=1\nExecMainStatus=%d\n", state, f.switchExit)
	case argv == "readlink -f /run/current-system":
		fmt.Fprintln(out, f.current)
	case strings.HasPrefix(argv, "find -L "):
		for _, u := range f.owned {
			fmt.Fprintf(out, "f %s\n", u)
		}
		fmt.Fprintln(out, "d multi-user.target.wants")
		for _, u := range f.wanted {
			fmt.Fprintf(out, "f multi-user.target.wants/%s\n", u)
		}
	case strings.HasPrefix(argv, "cat -- /run/current-system/etc/switchyard/chain"):
		return 1, nil
	case strings.HasPrefix(argv, "test -e /run/current-system/etc/switchyard/chain "):
		return 1, nil // no chain declared
	}
	return 0, nil
}

func (f *fakeNode) CopyClosure(ctx context.Context, paths []string) error {
	f.record("copy " + strings.Join(paths, " "))
	return nil
}
func (f *fakeNode) SwitchRuntimeMaxArgs() []string { return []string{"--property=RuntimeMaxSec=60"} }
func (f *fakeNode) FinalizeBootloader(ctx context.Context, top string) error {
	f.record("finalize " + top)
	return nil
}
func (f *fakeNode) RevertBootloader(ctx context.Context) error {
	f.record("revert")
	return nil
}

// events records what the body reports, in order.
type events struct {
	mu      sync.Mutex
	list    []string
	verdict verdict.Verdict
}

func (e *events) Phase(node, phase string, state PhaseState, elapsed time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, phase+":"+string(state))
}
func (e *events) Log(node, level, msg string) {}
func (e *events) Verdict(v verdict.Verdict) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, "VERDICT")
	e.verdict = v
}

// started lists the phases that started, in order.
func (e *events) started() []string {
	var out []string
	for _, s := range e.list {
		if p, ok := strings.CutSuffix(s, ":start"); ok {
			out = append(out, p)
		}
	}
	return out
}

func testConfig(verdictOnly bool) Config {
	c, _ := ConfigFromEnv(func(string) string { return "" })
	c.VerdictOnly = verdictOnly
	c.SettleAttempts, c.CycleWindows, c.CycleInterval, c.WaitTimeout = 2, 2, 0, 0
	return c
}

func deploy(t *testing.T, f *fakeNode, cfg Config) (Result, *events) {
	t.Helper()
	ev := &events{}
	d := &Deploy{Node: "web1", Transport: f, Config: cfg, Reporter: ev,
		Source:  Source{Toplevel: f.toplevel},
		resolve: func(context.Context, Source) (string, error) { return f.toplevel, nil },
		poll:    time.Millisecond}
	return d.Run(context.Background()), ev
}

func TestDeployPassRunsEveryPhaseInOrder(t *testing.T) {
	f := loadFake(t, "healthy")
	res, ev := deploy(t, f, testConfig(false))
	want := []string{"build", "wait", "push", "snapshot", "switch", "switch-result", "confirm", "owned", "sweep",
		"settle", "cycle-watch", "loop-watch", "classify", "verdict", "report", "finalize", "conclude"}
	if diff := cmp.Diff(want, ev.started()); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if res.ExitCode != 0 || !res.Verdict.OK || res.Verdict.Switch.Result != verdict.SwitchOK {
		t.Errorf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if f.did("copy "+f.toplevel) != 1 || f.did("finalize "+f.toplevel) != 1 || f.did("run systemd-run ") != 1 {
		t.Errorf("copy, switch and finalize must each run once: %v", f.log)
	}
	if res.Verdict.BootEntry != f.toplevel {
		t.Errorf("boot_entry %q", res.Verdict.BootEntry)
	}
	// The full phase table is SPEC 4.1's, chain gate included.
	if got := PhaseNames(); len(got) != 18 || got[3] != "chain" {
		t.Errorf("phase table %v", got)
	}
}

func TestVerdictOnlyPassChangesNothing(t *testing.T) {
	f := loadFake(t, "healthy")
	res, ev := deploy(t, f, testConfig(true))
	want := []string{"wait", "chain", "snapshot", "owned", "sweep", "settle", "cycle-watch", "loop-watch",
		"classify", "verdict", "report", "conclude"}
	if diff := cmp.Diff(want, ev.started()); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	for _, p := range []string{"build", "push", "switch", "switch-result", "confirm", "finalize"} {
		if !contains(ev.list, p+":skipped") {
			t.Errorf("%s not reported skipped", p)
		}
	}
	if f.did("copy") != 0 || f.did("finalize") != 0 || f.did("run systemd-run") != 0 || f.did("revert") != 0 {
		t.Errorf("the verdict-only pass changed the node: %v", f.log)
	}
	v := res.Verdict
	if res.ExitCode != 0 || v.Pass != verdict.PassVerdictOnly || v.Switch.Result != verdict.SwitchSkipped || v.Toplevel != f.toplevel {
		t.Errorf("exit %d verdict %+v", res.ExitCode, v)
	}
}

func TestFailedUnitFinalizesBeforeTheNonZeroExit(t *testing.T) {
	f := loadFake(t, "failed-unit")
	res, ev := deploy(t, f, testConfig(false))
	if res.ExitCode != 1 || res.Verdict.Switch.Result != verdict.SwitchUnitsFailed {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if diff := cmp.Diff([]string{"broken.service"}, res.Verdict.Units.Failed); diff != "" {
		t.Errorf("failed (-want +got):\n%s", diff)
	}
	if f.did("finalize "+f.toplevel) != 1 {
		t.Errorf("finalize did not run: %v", f.log)
	}
	// finalize comes right after the report, before conclude.
	tail := strings.Join(ev.list[len(ev.list)-6:], " ")
	if tail != "report:start VERDICT report:done finalize:start finalize:done conclude:start" &&
		!strings.HasPrefix(tail, "VERDICT report:done finalize:start finalize:done conclude:start") {
		t.Errorf("event tail %q", tail)
	}
}

func TestNeverConfirmedRevertsAndFails(t *testing.T) {
	f := loadFake(t, "healthy")
	f.activates = false
	res, ev := deploy(t, f, testConfig(false))
	if res.ExitCode != 1 || res.Verdict.Switch.Result != verdict.SwitchNeverConfirmed {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if f.did("revert") != 1 || f.did("finalize") != 0 {
		t.Errorf("want revert and no finalize: %v", f.log)
	}
	if !contains(ev.list, "finalize:skipped") {
		t.Errorf("finalize not reported skipped: %v", ev.list)
	}
	if res.Verdict.BootEntry == f.toplevel {
		t.Errorf("boot entry reported at the never-activated toplevel")
	}
}

func TestUnreachableNodeStopsAfterWait(t *testing.T) {
	f := loadFake(t, "healthy")
	f.unreachable = true
	res, ev := deploy(t, f, testConfig(false))
	if res.ExitCode != 3 || res.Verdict.Reachable || res.Verdict.OK {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	if diff := cmp.Diff([]string{"build", "wait", "verdict", "report", "conclude"}, ev.started()); diff != "" {
		t.Errorf("phases (-want +got):\n%s", diff)
	}
	if res.Verdict.Units.Failed != nil {
		t.Errorf("units of an unreachable node must be not read")
	}
	if !strings.Contains(strings.Join(res.Verdict.Reasons, ";"), "unreachable") {
		t.Errorf("reasons %v", res.Verdict.Reasons)
	}
}

func TestRestartLoopFailsOnlyTheVerdictOnlyPass(t *testing.T) {
	for _, tc := range []struct {
		verdictOnly bool
		exit        int
	}{{false, 0}, {true, 1}} {
		f := loadFake(t, "restart-loop")
		// The recording's last six samples, looping for about 25 to 50 s; a body reads
		// at most six times with testConfig, so no sample is read twice.
		f.next = len(f.samples) - 6
		cfg := testConfig(tc.verdictOnly)
		res, _ := deploy(t, f, cfg)
		if res.ExitCode != tc.exit {
			t.Errorf("verdict-only=%v: exit %d, want %d; loops %+v reasons %v", tc.verdictOnly, res.ExitCode, tc.exit,
				res.Verdict.Units.RestartLoops, res.Verdict.Reasons)
		}
		if loops := res.Verdict.Units.RestartLoops; len(loops) != 1 || loops[0].Unit != "flappy.service" || loops[0].BudgetS != 30 {
			t.Errorf("verdict-only=%v: loops %+v", tc.verdictOnly, loops)
		}
	}
}

func TestSeveredBusIsNotReadNeverNone(t *testing.T) {
	f := loadFake(t, "severed-bus")
	res, _ := deploy(t, f, testConfig(true))
	v := res.Verdict
	if v.SystemState != nil || v.Units.Failed != nil || v.Units.SetAside != nil || v.Units.RestartLoops != nil {
		t.Errorf("severed bus read as state: %+v", v)
	}
	if res.ExitCode != 3 {
		t.Errorf("exit %d, want 3", res.ExitCode)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// SPEC 4.5 "unchanged": a node already running the toplevel is judged, not switched.
func TestUnchangedNodeIsJudgedNotSwitched(t *testing.T) {
	f := loadFake(t, "healthy") // its samples show the toplevel running
	ev := &events{}
	d := &Deploy{Node: "web1", Transport: f, Config: testConfig(false), Reporter: ev, SkipUnchanged: true,
		Source:  Source{Toplevel: f.toplevel},
		resolve: func(context.Context, Source) (string, error) { return f.toplevel, nil }, poll: time.Millisecond}
	res := d.Run(context.Background())
	if res.ExitCode != 0 || res.Verdict.Switch.Result != verdict.SwitchUnchanged {
		t.Fatalf("exit %d verdict %+v", res.ExitCode, res.Verdict)
	}
	for _, p := range []string{"switch", "switch-result", "confirm", "finalize"} {
		if !contains(ev.list, p+":skipped") {
			t.Errorf("%s not skipped: %v", p, ev.list)
		}
	}
	if f.did("run systemd-run") != 0 || f.did("finalize") != 0 {
		t.Errorf("an unchanged node was switched: %v", f.log)
	}
	if f.did("copy") != 1 {
		t.Errorf("the copy (one query of the node) must still run once: %v", f.log)
	}
	if !contains(ev.started(), "cycle-watch") {
		t.Errorf("the verdict phases must still run: %v", ev.started())
	}
}
