package ssh

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// nodeCPU is the node container's CPU time so far (testbed.InstanceCPU).
func nodeCPU(t *testing.T, instance string) time.Duration {
	t.Helper()
	d, ok := testbed.InstanceCPU(instance)
	if !ok {
		t.Fatalf("cgroup of %s: no CPU usage", instance)
	}
	return d
}

func medianOf(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// TestMeasureCopy measures bench's row (a): a fresh copy of bench/closure.nix's
// closure (1,000 small paths and one of 32 MiB) by this transport (a new
// connection each time, as a deploy makes), by nix-copy-closure, and the export's
// bytes through one ssh pipe into cat, each to a node of its own, in alternating
// order over three rounds; it logs the medians of the wall time and of the node
// container's CPU, and their ratios. A measurement, not a check: it runs only
// with SWITCHYARD_MEASURE_COPY=1.
func TestMeasureCopy(t *testing.T) {
	if os.Getenv("SWITCHYARD_MEASURE_COPY") == "" {
		t.Skip("a measurement: SWITCHYARD_MEASURE_COPY=1 runs it")
	}
	bed := testbed.Require(t)
	out, err := exec.Command("nix-build", filepath.Join(testbed.RepoRoot(), "bench", "closure.nix"), "--no-out-link",
		"-j", "4", "--argstr", "tag", "measure-copy").Output()
	if err != nil {
		t.Fatal(err)
	}
	top := strings.TrimSpace(string(out))
	out, err = exec.Command("nix-store", "--query", "--requisites", top).Output()
	if err != nil {
		t.Fatal(err)
	}
	paths := strings.Fields(string(out))
	sy, ref, pipe := bed.Node(t), bed.Node(t), bed.Node(t)
	names := []string{"switchyard", "nix-copy-closure", "ssh pipe"}
	var wall, cpu [3][]time.Duration
	var sent int64
	for round := range 3 {
		if round > 0 {
			for _, nd := range []*testbed.Node{sy, ref} {
				nd.MustExec(t, append([]string{"nix-store", "--delete"}, paths...)...)
			}
		}
		sides := []int{0, 1, 2}
		if round%2 == 1 {
			sides = []int{1, 0, 2}
		}
		for _, side := range sides {
			nd := []*testbed.Node{sy, ref, pipe}[side]
			c0, start := nodeCPU(t, nd.Name), time.Now()
			switch side {
			case 0:
				tr, err := New(Config{User: "root", Host: "127.0.0.1", Port: nd.SSHPort,
					KnownHostsFile: nd.KnownHosts, KeyFiles: []string{nd.KeyFile}})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				err = tr.CopyClosure(ctx, []string{top})
				cancel()
				sent = tr.LastCopy().Bytes
				tr.Close()
				if err != nil {
					t.Fatal(err)
				}
			case 1:
				cmd := exec.Command("nix-copy-closure", "--to", nd.SSHTarget(), top)
				cmd.Env = append(os.Environ(), "NIX_SSHOPTS="+strings.Join(nd.SSHOptions(), " "))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("nix-copy-closure: %v: %s", err, out)
				}
			case 2:
				export := exec.Command("nix-store", append([]string{"--export"}, paths...)...)
				sink := exec.Command("ssh", append(nd.SSHOptions(), nd.SSHTarget(), "cat >/dev/null")...)
				r, w := io.Pipe()
				export.Stdout, sink.Stdin = w, r
				if err := sink.Start(); err != nil {
					t.Fatal(err)
				}
				err := export.Run()
				w.CloseWithError(err)
				if werr := sink.Wait(); err == nil {
					err = werr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			wall[side], cpu[side] = append(wall[side], time.Since(start)), append(cpu[side], nodeCPU(t, nd.Name)-c0)
		}
	}
	t.Logf("%d paths, %.1f MiB sent by switchyard", len(paths), float64(sent)/(1<<20))
	for i, name := range names {
		t.Logf("%-16s wall %v (all %v), node CPU %v (all %v)", name, medianOf(wall[i]), wall[i], medianOf(cpu[i]), cpu[i])
	}
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	t.Logf("switchyard / nix-copy-closure: wall %.2f, node CPU %.2f", ratio(medianOf(wall[0]), medianOf(wall[1])), ratio(medianOf(cpu[0]), medianOf(cpu[1])))
	t.Logf("switchyard / ssh pipe: wall %.2f", ratio(medianOf(wall[0]), medianOf(wall[2])))
}
