package nixserve_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// countingNixStore is this machine's nix-store behind a wrapper that appends the
// store paths of every `--export` it runs to a log, one per line.
func countingNixStore(t *testing.T) (wrapper string, exported func() []string) {
	t.Helper()
	real, err := exec.LookPath("nix-store")
	if err != nil {
		t.Skip("nix-store not on PATH")
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "exported")
	wrapper = filepath.Join(dir, "nix-store")
	script := "#!/bin/sh\nif [ \"$1\" = --export ]; then shift; printf '%s\\n' \"$@\" >> '" + log + "'; set -- --export \"$@\"; fi\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return wrapper, func() []string {
		b, _ := os.ReadFile(log)
		return strings.Fields(string(b))
	}
}

// needNixBuild skips a test on a machine that cannot build its closure (the
// flake's check phase has no nix-build).
func needNixBuild(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("nix-build"); err != nil {
		t.Skip("nix-build not on PATH")
	}
}

// Issue 14 item 4: a fleet's nodes share their closure's export. Eight concurrent
// copies of one closure to eight nodes that lack it run the local export once per
// path, and every node gets every path.
func TestConcurrentCopiesExportOnce(t *testing.T) {
	needNixBuild(t)
	root, closure := buildTestClosure(t, "export-once", 30, 1)
	nixserve.ResetSpool()
	t.Cleanup(nixserve.ResetSpool)
	wrapper, exported := countingNixStore(t)
	local := nixserve.LocalStore{Command: wrapper}
	nodes := make([]*fakeNode, 8)
	var wg sync.WaitGroup
	for i := range nodes {
		nodes[i] = newFakeNode()
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err, served := copyTo(ctxFor(t, 2*time.Minute), nodes[i], local, root)
			if err != nil || served != nil || st.Sent != len(closure) {
				t.Errorf("node %d: %+v, %v; node: %v", i, st, err, served)
			}
		}()
	}
	wg.Wait()
	got := exported()
	slices.Sort(got)
	want := slices.Sorted(slices.Values(closure))
	if !slices.Equal(got, want) {
		t.Errorf("nix-store --export ran for %d paths (%d distinct) for 8 copies of %d paths, want each once",
			len(got), len(slices.Compact(slices.Clone(got))), len(closure))
	}
	for i, n := range nodes {
		if n.count() != len(closure) || len(n.resent) != 0 {
			t.Errorf("node %d holds %d of %d paths, %d sent twice", i, n.count(), len(closure), len(n.resent))
		}
	}

	// A later copy of the same closure reads what the first ones exported.
	if st, err, _ := copyTo(ctxFor(t, time.Minute), newFakeNode(), local, root); err != nil || st.Sent != len(closure) {
		t.Errorf("later copy: %+v, %v", st, err)
	}
	if n := len(exported()); n != len(closure) {
		t.Errorf("a later copy exported again: %d paths exported in all", n)
	}

	// Once the spool has been idle for its time, it is gone: a copy exports anew.
	defer nixserve.SetSpoolIdle(10 * time.Millisecond)()
	if _, err, _ := copyTo(ctxFor(t, time.Minute), newFakeNode(), local, root); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if st, err, _ := copyTo(ctxFor(t, time.Minute), newFakeNode(), local, root); err != nil || st.Sent != len(closure) {
		t.Errorf("copy after the idle time: %+v, %v", st, err)
	}
	if n := len(exported()); n != 2*len(closure) {
		t.Errorf("after the idle time: %d paths exported in all, want %d", n, 2*len(closure))
	}
}

// Issue 35: a copy alone in the process streams a record longer than it may spool
// (here 256 KiB) to its node and leaves it out of the spool: a later copy exports
// that path again, and only that one. With another copy running, the record is
// spooled, and a later copy reads it from there.
func TestLoneCopyLeavesLongRecordOut(t *testing.T) {
	needNixBuild(t)
	root, closure := buildTestClosure(t, "spool-alone", 10, 1)
	big := ""
	for _, p := range closure {
		if strings.HasSuffix(p, "-sy-copy-big-spool-alone") {
			big = p
		}
	}
	if big == "" {
		t.Fatalf("no big path in %v", closure)
	}
	defer nixserve.SetSpoolAloneMax(256 << 10)()
	for _, company := range []bool{false, true} {
		nixserve.ResetSpool()
		wrapper, exported := countingNixStore(t)
		local := nixserve.LocalStore{Command: wrapper}
		release := func() {}
		if company {
			release = nixserve.HoldSpool()
		}
		for i := range 2 {
			n := newFakeNode()
			st, err, served := copyTo(ctxFor(t, time.Minute), n, local, root)
			if err != nil || served != nil || st.Sent != len(closure) || n.count() != len(closure) {
				t.Fatalf("company %v, copy %d: %+v, %v; node: %v; %d of %d paths", company, i+1, st, err, served, n.count(), len(closure))
			}
		}
		release()
		want := 2
		if company {
			want = 1
		}
		got := exported()
		times := 0
		for _, p := range got {
			if p == big {
				times++
			}
		}
		if times != want || len(got) != len(closure)+want-1 {
			t.Errorf("company %v: exported %d paths for a closure of %d, the long one %d times (want %d)",
				company, len(got), len(closure), times, want)
		}
	}
	nixserve.ResetSpool()
}

// A copy that breaks off (its node dies, its context ends) in the middle of the
// export it produces for the others leaves them to produce the rest themselves.
func TestSharedExportSurvivesAFailedCopy(t *testing.T) {
	needNixBuild(t)
	root, closure := buildTestClosure(t, "export-cut", 30, 1)
	for _, cut := range []int64{2000, 300 << 10} {
		nixserve.ResetSpool()
		wrapper, exported := countingNixStore(t)
		local := nixserve.LocalStore{Command: wrapper}
		var wg sync.WaitGroup
		dying := newFakeNode()
		dying.dieAfter = cut
		ctx, cancel := context.WithCancel(context.Background())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			if _, err, _ := copyTo(ctx, dying, local, root); err == nil {
				t.Errorf("cut at %d: the dying node's copy succeeded", cut)
			}
		}()
		nodes := []*fakeNode{newFakeNode(), newFakeNode(), newFakeNode()}
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, err, served := copyTo(ctxFor(t, 2*time.Minute), n, local, root)
				if err != nil || served != nil || st.Sent != len(closure) {
					t.Errorf("cut at %d: node %d: %+v, %v; node: %v", cut, i, st, err, served)
				}
			}()
		}
		wg.Wait()
		if n := len(exported()); n < len(closure) || n > 2*len(closure) {
			t.Errorf("cut at %d: %d paths exported for a closure of %d", cut, n, len(closure))
		}
	}
	nixserve.ResetSpool()
}
