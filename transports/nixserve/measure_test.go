package nixserve_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
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

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// TestMeasureImportVsAdd measures what a fresh copy of bench/closure.nix's closure
// (1,000 small paths and one of 32 MiB) costs the node, with cmdImportPaths (the
// copy before issue 14 item 4's pipelining) and with pipelined cmdAddToStoreNar,
// through `incus exec`, in alternating order over three rounds; it logs the
// medians of the wall time and of the node container's CPU. A measurement, not a
// check: it runs only with SWITCHYARD_MEASURE_COPY=1.
func TestMeasureImportVsAdd(t *testing.T) {
	if os.Getenv("SWITCHYARD_MEASURE_COPY") == "" {
		t.Skip("a measurement: SWITCHYARD_MEASURE_COPY=1 runs it")
	}
	bed := testbed.Require(t)
	top := strings.TrimSpace(nixStoreOutCmd(t, "nix-build", filepath.Join(testbed.RepoRoot(), "bench", "closure.nix"), "--no-out-link",
		"-j", "4", "--argstr", "tag", "measure-copy"))
	paths := strings.Fields(nixStoreOut(t, "--query", "--requisites", top))
	oldNode, newNode := bed.Node(t), bed.Node(t)
	var wall, cpu [2][]time.Duration // [0] import, [1] add
	var bytes [2]int64
	for round := range 3 {
		if round > 0 {
			for _, nd := range []*testbed.Node{oldNode, newNode} {
				nd.MustExec(t, append([]string{"nix-store", "--delete"}, paths...)...)
			}
		}
		sides := []int{0, 1}
		if round%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			nd := []*testbed.Node{oldNode, newNode}[side]
			restore := nixserve.SetForceImport(side == 0)
			c0, start := nodeCPU(t, nd.Name), time.Now()
			st, err := copyByIncus(t, nd, []string{top}, nil)
			took, used := time.Since(start), nodeCPU(t, nd.Name)-c0
			restore()
			if err != nil || st.Sent != len(paths) {
				t.Fatalf("round %d side %d: %+v, %v", round, side, st, err)
			}
			wall[side], cpu[side], bytes[side] = append(wall[side], took), append(cpu[side], used), st.Bytes
		}
	}
	t.Logf("%d paths, %.1f MiB (import) / %.1f MiB (add) sent", len(paths), float64(bytes[0])/(1<<20), float64(bytes[1])/(1<<20))
	t.Logf("cmdImportPaths:          wall %v (all %v), node CPU %v (all %v)", median(wall[0]), wall[0], median(cpu[0]), cpu[0])
	t.Logf("pipelined AddToStoreNar: wall %v (all %v), node CPU %v (all %v)", median(wall[1]), wall[1], median(cpu[1]), cpu[1])
	t.Logf("add/import: wall %.2f, node CPU %.2f", float64(median(wall[1]))/float64(median(wall[0])), float64(median(cpu[1]))/float64(median(cpu[0])))
}

func nixStoreOutCmd(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := execOutput(name, args...)
	if err != nil {
		t.Fatalf("%s %q: %v", name, args, err)
	}
	return out
}
