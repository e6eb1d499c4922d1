package verdict_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/verdict"
)

// update rewrites the goldens from what the code produces now: go test ./verdict -update.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with the golden file at path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-golden +got):\n%s", path, diff)
	}
}

func jsonIndent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// loadRecording reads testdata/<name>/ and parses its samples.
func loadRecording(t *testing.T, name string) (recording, []verdict.Sample) {
	t.Helper()
	dir := filepath.Join("testdata", name)
	b, err := os.ReadFile(filepath.Join(dir, "recording.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec recording
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s/recording.json: %v", dir, err)
	}
	var samples []verdict.Sample
	for _, rs := range rec.Samples {
		out, err := os.ReadFile(filepath.Join(dir, rs.File))
		if err != nil {
			t.Fatal(err)
		}
		s, err := verdict.ParseSample(out, rs.At)
		if err != nil {
			t.Fatalf("%s/%s: %v", dir, rs.File, err)
		}
		samples = append(samples, s)
	}
	return rec, samples
}

// loadRestarts parses the restart histories recorded with a scenario (journalctl
// output of verdict.RestartsArgv, one file per unit); nil when none were recorded.
func loadRestarts(t *testing.T, name string, rec recording) map[string][]verdict.Restart {
	t.Helper()
	if len(rec.Restarts) == 0 {
		return nil
	}
	out := map[string][]verdict.Restart{}
	for unit, file := range rec.Restarts {
		b, err := os.ReadFile(filepath.Join("testdata", name, file))
		if err != nil {
			t.Fatal(err)
		}
		hist, err := verdict.ParseRestarts(b)
		if err != nil {
			t.Fatalf("%s/%s: %v", name, file, err)
		}
		out[unit] = hist
	}
	return out
}

var recordings = []string{"healthy", "severed-bus", "failed-unit", "restart-loop", "condition-skipped", "spawn-fault", "cycling-stale",
	"cgroup-spawn", "slow-loop", "late-loop", "pending-start", "ng-switch"}

// loadSwitch reads what a recording holds of the switch: the sample taken before it
// and its messages; zero values when the recording has none.
func loadSwitch(t *testing.T, name string, rec recording) (before verdict.Sample, log verdict.SwitchLog) {
	t.Helper()
	dir := filepath.Join("testdata", name)
	if rec.Before != "" {
		out, err := os.ReadFile(filepath.Join(dir, rec.Before))
		if err != nil {
			t.Fatal(err)
		}
		if before, err = verdict.ParseSample(out, rec.Samples[0].At.Add(-time.Second)); err != nil {
			t.Fatalf("%s/%s: %v", dir, rec.Before, err)
		}
	}
	if rec.SwitchLog != "" {
		out, err := os.ReadFile(filepath.Join(dir, rec.SwitchLog))
		if err != nil {
			t.Fatal(err)
		}
		log = verdict.ParseSwitchLog(string(out))
	}
	return before, log
}

// TestParseSampleGolden parses recorded samples, real output of ReadScript on
// test-bed nodes, against their goldens: the first and the final sample of each
// recording (the others feed the classification goldens).
func TestParseSampleGolden(t *testing.T) {
	for _, name := range recordings {
		t.Run(name, func(t *testing.T) {
			rec, samples := loadRecording(t, name)
			for _, i := range slices.Compact([]int{0, len(samples) - 1}) {
				golden(t, filepath.Join("testdata", name, rec.Samples[i].File+".golden"), sampleLines(t, samples[i]))
			}
		})
	}
}

// sampleLines renders a sample for a golden: its fields on the first line (Units
// replaced by the number of units read, null when not read), then one line per
// unit, so a diff names the unit that changed.
func sampleLines(t *testing.T, s verdict.Sample) []byte {
	t.Helper()
	units := s.Units
	s.Units = nil
	var head map[string]any
	if err := json.Unmarshal(jsonCompact(t, s), &head); err != nil {
		t.Fatal(err)
	}
	head["Units"] = nil
	if units != nil {
		head["Units"] = len(units)
	}
	var b bytes.Buffer
	b.Write(jsonCompact(t, head))
	for _, name := range slices.Sorted(maps.Keys(units)) {
		b.Write(jsonCompact(t, units[name]))
	}
	return b.Bytes()
}

func jsonCompact(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func set(lists ...[]string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, u := range l {
			m[u] = true
		}
	}
	return m
}

// TestVerdictGolden classifies recorded scenarios and renders both report forms.
func TestVerdictGolden(t *testing.T) {
	cases := []struct {
		name, rec string
		upTo      int // use samples[:upTo]; 0 all
		pass      verdict.Pass
		strict    bool
	}{
		{name: "healthy", rec: "healthy", pass: verdict.PassDeploy, strict: true},
		{name: "severed-bus", rec: "severed-bus", pass: verdict.PassVerdictOnly, strict: true},
		{name: "failed-unit", rec: "failed-unit", pass: verdict.PassDeploy, strict: true},
		{name: "failed-unit-lenient", rec: "failed-unit", pass: verdict.PassDeploy, strict: false},
		{name: "restart-loop", rec: "restart-loop", pass: verdict.PassDeploy, strict: true},
		{name: "restart-loop-early-verdict-only", rec: "restart-loop", upTo: 4, pass: verdict.PassVerdictOnly, strict: true},
		{name: "restart-loop-verdict-only", rec: "restart-loop", pass: verdict.PassVerdictOnly, strict: true},
		{name: "condition-skipped", rec: "condition-skipped", pass: verdict.PassDeploy, strict: true},
		{name: "spawn-fault", rec: "spawn-fault", pass: verdict.PassDeploy, strict: true},
		{name: "cycling-stale", rec: "cycling-stale", pass: verdict.PassDeploy, strict: true},
		{name: "cgroup-spawn", rec: "cgroup-spawn", pass: verdict.PassDeploy, strict: true},
		{name: "slow-loop", rec: "slow-loop", pass: verdict.PassDeploy, strict: true},
		{name: "late-loop-verdict-only", rec: "late-loop", pass: verdict.PassVerdictOnly, strict: true},
		{name: "pending-start", rec: "pending-start", pass: verdict.PassDeploy, strict: true},
		{name: "ng-switch", rec: "ng-switch", pass: verdict.PassDeploy, strict: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, samples := loadRecording(t, tc.rec)
			if tc.upTo > 0 {
				samples = samples[:tc.upTo]
			}
			final := samples[len(samples)-1]
			before, switchLog := loadSwitch(t, tc.rec, rec)
			classes := verdict.Classify(verdict.Input{
				Pass:         tc.pass,
				Samples:      samples,
				CycleStart:   rec.CycleStart,
				Owned:        set(rec.Owned, rec.StandIn.Owned),
				Wanted:       set(rec.Wanted, rec.StandIn.Wanted),
				Activated:    final.Activated,
				LoopGrace:    600 * time.Second,
				SettleWindow: 10 * time.Second,
				Restarts:     loadRestarts(t, tc.rec, rec),
				Before:       before,
				Switch:       switchLog,
			})
			golden(t, filepath.Join("testdata", "golden", tc.name+".classes.json"), jsonIndent(t, classes))

			sw := verdict.Switch{Result: verdict.SwitchSkipped}
			if tc.pass == verdict.PassDeploy {
				sw = verdict.Switch{Result: verdict.SwitchOK, ExitCode: rec.SwitchExit}
				if rec.SwitchExit == 4 {
					sw.Result = verdict.SwitchUnitsFailed
				}
			}
			v := verdict.Verdict{
				Node: tc.name, Target: "incus " + tc.name, Pass: tc.pass, Reachable: true,
				Toplevel: rec.Toplevel, Previous: rec.Previous, Switch: sw,
				SystemState: verdict.SystemStateOf(final), Units: classes, StrictUnits: tc.strict,
				BootEntry: final.BootEntry, PhasesMS: map[string]int64{},
			}
			if tc.pass == verdict.PassDeploy {
				v.PhasesMS = map[string]int64{"build": 0, "push": 812, "switch": 2100}
			}
			v.OK, v.ExitCode, v.Reasons = verdict.Decide(v)
			golden(t, filepath.Join("testdata", "golden", tc.name+".verdict.json"), jsonIndent(t, v))
			var text bytes.Buffer
			if err := v.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "golden", tc.name+".verdict.txt"), text.Bytes())
		})
	}
}

// TestUnreachableGolden: a node never reached has nothing read; both forms say so.
func TestUnreachableGolden(t *testing.T) {
	v := verdict.Verdict{
		Node: "web1", Target: "ssh root@192.0.2.10:22", Pass: verdict.PassDeploy,
		Toplevel: "/nix/store/b7z3bqfdqkidzvjb5s3xgjj0mg7bmn0l-nixos-system-restart-loop",
		Switch:   verdict.Switch{Result: verdict.SwitchSkipped}, StrictUnits: true,
		Units: verdict.Classify(verdict.Input{}),
	}
	v.OK, v.ExitCode, v.Reasons = verdict.Decide(v)
	golden(t, filepath.Join("testdata", "golden", "unreachable.verdict.json"), jsonIndent(t, v))
	var text bytes.Buffer
	if err := v.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "golden", "unreachable.verdict.txt"), text.Bytes())
}
