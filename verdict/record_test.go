package verdict_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/verdict"
)

// record re-records testdata/<scenario>/ from live test-bed nodes:
//
//	SWITCHYARD_TESTBED=require go test ./verdict -run TestRecord -record
//
// then `go test ./verdict -update` rewrites the goldens made from the recordings.
var record = flag.Bool("record", false, "record testdata/<scenario>/ samples from live test-bed nodes")

// recording describes one recorded scenario: how it was made and what the deployed
// configuration defines, so the goldens classify real samples with real inputs.
type recording struct {
	Scenario   string           `json:"scenario"`
	Closure    string           `json:"closure"` // attribute of testbed/closures
	Toplevel   string           `json:"toplevel"`
	Previous   string           `json:"previous"`
	SwitchExit int              `json:"switch_exit"`
	Owned      []string         `json:"owned"`  // unit files of <toplevel>/etc/systemd/system
	Wanted     []string         `json:"wanted"` // units linked from its *.wants/ and *.requires/
	StandIn    standIn          `json:"stand_in,omitempty"`
	Samples    []recordedSample `json:"samples"`
	CycleStart int              `json:"cycle_start"`
	// Restarts names, per unit, the file holding its restart history as the loop
	// watch reads it (journalctl output of verdict.RestartsArgv after the last sample).
	Restarts map[string]string `json:"restarts,omitempty"`
	// Before names the sample taken before the switch (the snapshot's), and SwitchLog
	// the switch's own output (switch-to-configuration's stderr, which a deploy reads
	// from the switch unit's journal); "" when not recorded.
	Before    string `json:"before,omitempty"`
	SwitchLog string `json:"switch_log,omitempty"`
	Notes     string `json:"notes"`
}

// standIn lists units installed on the node by hand after the switch, standing in
// for units of a configuration: the test closures belong to the test bed, and a
// unit behaves the same whether its file came from a closure or not.
type standIn struct {
	Owned  []string `json:"owned,omitempty"`
	Wanted []string `json:"wanted,omitempty"`
}

type recordedSample struct {
	File string    `json:"file"`
	At   time.Time `json:"at"` // host clock when the read started
}

// handUnit is a unit file installed by hand; wantedBy links it from multi-user.target.wants.
type handUnit struct {
	name, text string
	wantedBy   bool
}

func TestRecord(t *testing.T) {
	if !*record {
		t.Skip("re-recording testdata needs -record")
	}
	bed := testbed.Require(t)
	scenarios := []struct {
		name, closure string
		hand          []handUnit
		standIn       standIn
		samples       int
		every         time.Duration
		cycleStart    int
		before        func(t *testing.T, n *testbed.Node) // before the switch
		after         func(t *testing.T, n *testbed.Node) // right after the switch, before sampling
		history       []string                            // units whose restart history is read after the last sample
		notes         string
	}{
		{name: "healthy", closure: "healthy", samples: 3, every: 2 * time.Second, cycleStart: 1,
			notes: "healthy closure switched on a fresh node; samples 2 s apart"},
		{name: "failed-unit", closure: "failed-unit", samples: 3, every: 2 * time.Second, cycleStart: 1,
			after: func(t *testing.T, n *testbed.Node) {
				// The sweep: restart the failed wanted unit; it fails again.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, _ = n.Exec(ctx, "systemctl", "restart", "broken.service")
			},
			notes: "failed-unit closure; broken.service restarted once (the sweep) and failed again"},
		{name: "restart-loop", closure: "restart-loop", samples: 12, every: 4 * time.Second, cycleStart: 4,
			notes: "restart-loop closure: flappy.service crashes after 1 s, RestartSec=1, DEPLOY_LOOP_BUDGET=30; 12 samples 4 s apart, about 45 s"},
		{name: "condition-skipped", closure: "condition-skipped", samples: 2, every: 2 * time.Second, cycleStart: 0,
			notes: "condition-skipped closure: only-on-metal.service skipped by ConditionPathExists"},
		{name: "spawn-fault", closure: "healthy", samples: 5, every: 3 * time.Second, cycleStart: 2,
			hand: []handUnit{
				{name: "rt.service", text: "[Unit]\nDescription=real-time scheduling the container may not grant\n[Service]\nExecStart=/bin/sleep 3600\nCPUSchedulingPolicy=fifo\nCPUSchedulingPriority=50\n", wantedBy: true},
				{name: "numa.service", text: "[Unit]\nDescription=binds to a NUMA node the host lacks, restarted forever\nStartLimitIntervalSec=0\n[Service]\nExecStart=/bin/sleep 3600\nNUMAPolicy=bind\nNUMAMask=7\nRestart=always\nRestartSec=3\n", wantedBy: true},
				{name: "noexec.service", text: "[Unit]\nDescription=its program is not in the closure\n[Service]\nExecStart=/nix/store/00000000000000000000000000000000-missing/bin/serve\n", wantedBy: true},
				{name: "old-cron.service", text: "[Unit]\nDescription=a leftover the configuration does not define\n[Service]\nType=oneshot\nExecStart=/bin/false\n"},
			},
			standIn: standIn{Owned: []string{"noexec.service", "numa.service", "rt.service"}, Wanted: []string{"noexec.service", "numa.service", "rt.service"}},
			after: func(t *testing.T, n *testbed.Node) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, _ = n.Exec(ctx, "systemctl", "start", "rt.service", "numa.service", "noexec.service", "old-cron.service")
			},
			notes: "healthy closure plus hand-installed units: rt.service fails 214/SETSCHEDULER (no real-time scheduling in the container), numa.service fails 242/NUMA_POLICY and is restarted forever, noexec.service fails 203/EXEC (its program is missing: the configuration's fault), old-cron.service fails and is not owned (set aside)"},
		{name: "cycling-stale", closure: "healthy", samples: 8, every: 3 * time.Second, cycleStart: 2,
			hand: []handUnit{
				{name: "tick.timer", text: "[Unit]\nDescription=fires every 2 s\n[Timer]\nOnActiveSec=1s\nOnUnitActiveSec=2s\nAccuracySec=1ms\n", wantedBy: true},
				{name: "tick.service", text: "[Unit]\nDescription=a short job the timer runs\n[Service]\nType=oneshot\nExecStart=/bin/true\n"},
				{name: "slow.service", text: "[Unit]\nDescription=a start job that takes ten minutes\n[Service]\nType=oneshot\nExecStart=/bin/sleep 600\n"},
				{name: "waiter.service", text: "[Unit]\nDescription=waits for slow.service\nAfter=slow.service\n[Service]\nExecStart=/bin/sleep 3600\n"},
				{name: "badset.service", text: "[Unit]\nDescription=no ExecStart: systemd rejects it\n[Service]\nType=simple\n", wantedBy: true},
				{name: "ghost.service", wantedBy: true}, // wanted, no unit file: not-found
			},
			standIn: standIn{
				Owned:  []string{"badset.service", "slow.service", "tick.service", "tick.timer", "waiter.service"},
				Wanted: []string{"badset.service", "ghost.service", "tick.timer"},
			},
			after: func(t *testing.T, n *testbed.Node) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, _ = n.Exec(ctx, "systemctl", "start", "--no-block", "tick.timer", "slow.service", "waiter.service")
			},
			notes: "healthy closure plus hand-installed units: tick.timer runs tick.service every 2 s (cycling), slow.service's start job runs for 10 minutes and waiter.service's start job waits for it (stale start jobs), badset.service has no ExecStart (bad-setting), ghost.service is wanted but has no unit file (not-found)"},
		{name: "cgroup-spawn", closure: "cgroup-starved", samples: 3, every: 2 * time.Second, cycleStart: 1,
			before: func(t *testing.T, n *testbed.Node) {
				n.MustExec(t, "sh", "-c", "mkdir -p /sys/fs/cgroup/unified/starved.slice && echo 0 > /sys/fs/cgroup/unified/starved.slice/cgroup.max.descendants")
			},
			hand:    []handUnit{{name: "forkless.service", text: "[Unit]\nDescription=started while PID 1 cannot fork\n[Service]\nExecStart=/bin/sleep 3600\n"}},
			standIn: standIn{Owned: []string{"forkless.service"}},
			after: func(t *testing.T, n *testbed.Node) {
				// PID 1's own pids cgroup allows no second task for the start: systemd
				// cannot fork, the start fails with Result=resources and no process.
				n.MustExec(t, "sh", "-c", "p=/sys/fs/cgroup/pids/init.scope/pids.max; echo 1 > $p; systemctl start forkless.service; echo max > $p")
				// The sweep: restart the failed wanted units. It also gives back the
				// ExecStartPre= status, which systemd does not keep across the
				// daemon-reload that installed forkless.service.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, _ = n.Exec(ctx, "systemctl", "restart", "cgroup-starved.service", "cgroup-starved-pre.service")
			},
			notes: "cgroup-starved closure switched after the test made /sys/fs/cgroup/unified/starved.slice with cgroup.max.descendants=0: cgroup-starved.service fails 219/CGROUP in its main process, cgroup-starved-pre.service in its ExecStartPre=; forkless.service (hand-installed) was started while /sys/fs/cgroup/pids/init.scope/pids.max was 1: Result=resources, no process; then both cgroup-starved units restarted (the sweep)"},
		{name: "slow-loop", closure: "slow-loop", samples: 10, every: 5 * time.Second, cycleStart: 2, history: []string{"slow-loop.service"},
			notes: "slow-loop closure: slow-loop.service is up 20 s, crashes, is restarted at once (RestartSec=100ms); 10 samples 5 s apart, then its restart history"},
		{name: "late-loop", closure: "late-loop", samples: 4, every: 3 * time.Second, cycleStart: 1, history: []string{"late-loop.service"},
			after: func(t *testing.T, n *testbed.Node) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				for {
					out, err := n.Exec(ctx, "systemctl", "show", "--value", "--property=NRestarts", "late-loop.service")
					if err != nil {
						t.Fatal(err)
					}
					if n, _ := strconv.Atoi(strings.TrimSpace(out)); n >= 3 {
						return
					}
					time.Sleep(2 * time.Second)
				}
			},
			notes: "late-loop closure: late-loop.service ran 70 s, then crashes every second (RestartSec=1, DEPLOY_LOOP_BUDGET=60); sampled once it had restarted 3 times, 4 samples 3 s apart, then its restart history"},
		{name: "pending-start", closure: "pending-start", samples: 3, every: 3 * time.Second, cycleStart: 1,
			after: func(t *testing.T, n *testbed.Node) { time.Sleep(2 * time.Second) },
			notes: "pending-start closure: slow-start.timer starts slow-start.service (a oneshot sleeping 10 minutes) a second after the switch; 3 samples 3 s apart"},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			top := bed.Build(t, sc.closure, "")
			node := bed.Node(t)
			rec := recording{Scenario: sc.name, Closure: sc.closure, Toplevel: top, StandIn: sc.standIn,
				CycleStart: sc.cycleStart, Notes: sc.notes}
			rec.Owned, rec.Wanted = closureUnits(t, top)
			rec.Previous = node.Readlink(t, "/run/current-system")
			if sc.before != nil {
				sc.before(t, node)
			}
			node.CopyClosure(t, top)
			rec.SwitchExit = node.Switch(t, top, "switch")
			// finalize (phase 17): point the system profile at the new toplevel, so the
			// boot section reads what a deployed node has.
			node.MustExec(t, "nix-env", "-p", "/nix/var/nix/profiles/system", "--set", top)
			installHandUnits(t, node, sc.hand)
			if sc.after != nil {
				sc.after(t, node)
			}
			dir := filepath.Join("testdata", sc.name)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			// Sampled as a body samples: the first sample reads every unit in full, the
			// later ones the units of the configuration and what the sampler watches.
			p := &verdict.Sampler{Full: map[string]bool{}}
			for _, set := range [][]string{rec.Owned, rec.Wanted, sc.standIn.Owned, sc.standIn.Wanted} {
				for _, u := range set {
					p.Full[u] = true
				}
			}
			for i := range sc.samples {
				if i > 0 {
					time.Sleep(sc.every)
				}
				rec.Samples = append(rec.Samples, recordSample(t, node, dir, i, p))
			}
			rec.Restarts = recordRestarts(t, node, dir, sc.history)
			writeRecording(t, dir, rec)
			if sc.name == "healthy" {
				recordSeveredBus(t, node, rec)
			}
		})
	}
}

// recordSeveredBus cuts root's way to systemd (the system bus and systemd's private
// socket), records one sample, and restores both.
func recordSeveredBus(t *testing.T, node *testbed.Node, healthy recording) {
	t.Helper()
	node.MustExec(t, "sh", "-c", "systemctl stop dbus.socket dbus.service && mv /run/systemd/private /run/systemd/private.off")
	dir := filepath.Join("testdata", "severed-bus")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	s := recordSample(t, node, dir, 0, &verdict.Sampler{})
	node.MustExec(t, "sh", "-c", "mv /run/systemd/private.off /run/systemd/private && systemctl start dbus.socket dbus.service")
	rec := healthy
	rec.Scenario, rec.Samples, rec.CycleStart = "severed-bus", []recordedSample{s}, 0
	rec.Notes = "the healthy node after `systemctl stop dbus.socket dbus.service` and moving /run/systemd/private away: systemctl cannot reach systemd"
	writeRecording(t, dir, rec)
}

func recordSample(t *testing.T, node *testbed.Node, dir string, i int, p *verdict.Sampler) recordedSample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	at := time.Now().UTC()
	out, err := node.Exec(ctx, append([]string{"sh", "-c", verdict.ReadScript, "sh"}, p.Args()...)...)
	if err != nil {
		t.Fatalf("read script on %s: %v", node.Name, err)
	}
	s, err := verdict.ParseSample([]byte(out), at)
	if err != nil {
		t.Fatalf("read script on %s: %v", node.Name, err)
	}
	p.Observe(s)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%02d.txt", i)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return recordedSample{File: name, At: at}
}

// recordRestarts reads each unit's restart history as the loop watch does
// (verdict.RestartsArgv with the unit's NRestarts) into restarts-<unit>.json.
func recordRestarts(t *testing.T, node *testbed.Node, dir string, units []string) map[string]string {
	t.Helper()
	if len(units) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	files := map[string]string{}
	for _, u := range units {
		n, err := node.Exec(ctx, "systemctl", "show", "--value", "--property=NRestarts", u)
		if err != nil {
			t.Fatal(err)
		}
		count, _ := strconv.Atoi(strings.TrimSpace(n))
		out, err := node.Exec(ctx, verdict.RestartsArgv(u, count)...)
		if err != nil {
			t.Fatalf("restart history of %s: %v", u, err)
		}
		name := "restarts-" + u + ".json"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		files[u] = name
	}
	return files
}

func writeRecording(t *testing.T, dir string, rec recording) {
	t.Helper()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "recording.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// installHandUnits writes unit files under /etc/systemd/system on the node (a unit
// without text is only linked, so it stays not-found) and reloads systemd.
func installHandUnits(t *testing.T, node *testbed.Node, units []handUnit) {
	t.Helper()
	if len(units) == 0 {
		return
	}
	var script strings.Builder
	script.WriteString("set -e\nmkdir -p /etc/systemd/system/multi-user.target.wants\n")
	for _, u := range units {
		if u.text != "" {
			fmt.Fprintf(&script, "printf '%%s' %s > /etc/systemd/system/%s\n", testbed.ShellQuote(u.text), u.name)
		}
		if u.wantedBy {
			fmt.Fprintf(&script, "ln -sfn /etc/systemd/system/%s /etc/systemd/system/multi-user.target.wants/%s\n", u.name, u.name)
		}
	}
	script.WriteString("systemctl daemon-reload\n")
	node.MustExec(t, "sh", "-c", script.String())
}

// closureUnits lists what a toplevel defines (unit files under etc/systemd/system)
// and wants (entries of its *.wants/ and *.requires/ directories).
func closureUnits(t *testing.T, top string) (owned, wanted []string) {
	t.Helper()
	dir := filepath.Join(top, "etc", "systemd", "system")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			owned = append(owned, e.Name())
			continue
		}
		if !strings.HasSuffix(e.Name(), ".wants") && !strings.HasSuffix(e.Name(), ".requires") {
			continue
		}
		links, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			wanted = append(wanted, l.Name())
		}
	}
	slices.Sort(owned)
	slices.Sort(wanted)
	return owned, slices.Compact(wanted)
}

// TestRecordNGSwitch records testdata/ng-switch/: a switch from one generation of the
// ng-switch closure to the next, as switch-to-configuration-ng leaves a node (issue 32
// item 4): keeper.service (restartIfChanged = false) still runs its previous
// definition, echo.service (socket-activated, running) is stopped and only its socket
// started again, and manual.service (failed by hand before the switch, pulled in by
// nothing) is reset by the switch and unloaded.
//
//	SWITCHYARD_TESTBED=require go test ./verdict -run TestRecordNGSwitch -record
func TestRecordNGSwitch(t *testing.T) {
	if !*record {
		t.Skip("re-recording testdata needs -record")
	}
	bed := testbed.Require(t)
	first, top := bed.Build(t, "ng-switch", "g1"), bed.Build(t, "ng-switch", "")
	node := bed.Node(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node.CopyClosure(t, first)
	if code := node.Switch(t, first, "switch"); code != 0 {
		t.Fatalf("switch to %s: exit %d", first, code)
	}
	node.MustExec(t, "nix-env", "-p", "/nix/var/nix/profiles/system", "--set", first)
	node.MustExec(t, "systemctl", "start", "echo.service")
	_, _ = node.Exec(ctx, "systemctl", "start", "manual.service") // fails on purpose

	dir := filepath.Join("testdata", "ng-switch")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	rec := recording{Scenario: "ng-switch", Closure: "ng-switch", Toplevel: top, Previous: first, CycleStart: 1,
		Before: "before.txt", SwitchLog: "switch.log",
		Notes: "ng-switch closure: generation g1 switched, echo.service started (its socket's fds), manual.service started by hand (fails); the snapshot's sample (before.txt, a first cheap sample: the failed unit in full); then the switch to the next generation (its stderr: switch.log) and 3 samples 2 s apart reading the owned, wanted and failed-before units in full"}
	rec.Owned, rec.Wanted = closureUnits(t, top)
	before := recordSample(t, node, dir, 0, &verdict.Sampler{Full: map[string]bool{}})
	if err := os.Rename(filepath.Join(dir, before.File), filepath.Join(dir, rec.Before)); err != nil {
		t.Fatal(err)
	}

	node.CopyClosure(t, top)
	out, err := node.Exec(ctx, "sh", "-c", testbed.ShellQuote(top+"/bin/switch-to-configuration")+" switch 2>&1")
	if err != nil {
		t.Fatalf("switch to %s: %v\n%s", top, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, rec.SwitchLog), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	node.MustExec(t, "nix-env", "-p", "/nix/var/nix/profiles/system", "--set", top)

	p := &verdict.Sampler{Full: map[string]bool{"manual.service": true}}
	for _, set := range [][]string{rec.Owned, rec.Wanted} {
		for _, u := range set {
			p.Full[u] = true
		}
	}
	for i := range 3 {
		if i > 0 {
			time.Sleep(2 * time.Second)
		}
		rec.Samples = append(rec.Samples, recordSample(t, node, dir, i, p))
	}
	writeRecording(t, dir, rec)
}
