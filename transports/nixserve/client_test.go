package nixserve_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

func storePath(hash int, name string) string {
	return fmt.Sprintf("/nix/store/%032d-%s", hash, name)
}

// fakeClosure is a closure of n leaves (leaf i references leaf i-1 except every
// fifth, every third references itself), one big path of bigSize bytes, and a
// root referencing all of them. It returns the store and the root.
func fakeClosure(n int, bigSize int64) (*fakeStore, string) {
	s := &fakeStore{paths: map[string]fakePath{}}
	var all []string
	for i := 0; i < n; i++ {
		p := storePath(1000+i, fmt.Sprintf("leaf-%d", i))
		fp := fakePath{text: fmt.Sprintf("leaf %d", i), deriver: storePath(5000+i, fmt.Sprintf("leaf-%d.drv", i))}
		if i%5 != 0 {
			fp.refs = append(fp.refs, storePath(1000+i-1, fmt.Sprintf("leaf-%d", i-1)))
		}
		if i%3 == 0 {
			fp.refs = append(fp.refs, p)
		}
		s.paths[p] = fp
		all = append(all, p)
	}
	big := storePath(9998, "big")
	s.paths[big] = fakePath{big: bigSize}
	all = append(all, big)
	root := storePath(9999, "root")
	s.paths[root] = fakePath{text: "root", refs: all}
	return s, root
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// checkNode checks that node holds every path of closure with the store's NAR,
// references and deriver.
func checkNode(t *testing.T, node *fakeNode, store *fakeStore, closure []string) {
	t.Helper()
	node.mu.Lock()
	defer node.mu.Unlock()
	for _, p := range closure {
		rec, ok := node.store[p]
		if !ok {
			t.Errorf("%s not valid on the node", p)
			continue
		}
		fp := store.paths[p]
		if rec.narHash != fp.narHash() || !slices.Equal(rec.references, fp.refs) || rec.deriver != fp.deriver {
			t.Errorf("%s differs on the node", p)
		}
	}
	if len(node.resent) != 0 {
		t.Errorf("paths the node held were sent again: %q", node.resent)
	}
}

func TestCopy(t *testing.T) {
	store, root := fakeClosure(40, 300000)
	closure, _ := store.Closure(context.Background(), []string{root})
	node := newFakeNode()

	st, err, served := copyTo(ctxFor(t, time.Minute), node, store, root)
	if err != nil || served != nil {
		t.Fatalf("Copy: %v; node: %v", err, served)
	}
	if st.Paths != 42 || st.Missing != 42 || st.Sent != 42 || st.Bytes < 300000 {
		t.Errorf("stats %+v", st)
	}
	checkNode(t, node, store, closure)
	if len(node.queries) != 1 || !slices.Equal(node.queries[0], closure) || node.imports != 0 || node.adds != 42 {
		t.Errorf("%d queries (first of %d paths), %d imports, %d cmdAddToStoreNar; want one query of the closure, one command per path", len(node.queries), len(node.queries[0]), node.imports, node.adds)
	}
	// The closure's records are asked while the node answers; those of the
	// missing paths too when the first are not back by then.
	if store.infoCalls < 1 || store.infoCalls > 2 {
		t.Errorf("%d NARInfos calls, want 1 or 2", store.infoCalls)
	}
	calls := store.infoCalls
	if !slices.Equal(store.exports[0], closure) {
		t.Errorf("export asked for %d paths, want the closure in its order", len(store.exports[0]))
	}

	// Again: the node holds everything; one query, no import, no export.
	st, err, served = copyTo(ctxFor(t, time.Minute), node, store, root)
	if err != nil || served != nil {
		t.Fatalf("second Copy: %v; node: %v", err, served)
	}
	if want := (nixserve.Stats{Paths: 42, Missing: 0, Sent: 0, Bytes: st.Bytes}); st != want || st.Bytes > 8192 {
		t.Errorf("second copy: stats %+v", st)
	}
	if len(node.queries) != 2 || node.adds != 42 || len(store.exports) != 1 || store.infoCalls > calls+1 {
		t.Errorf("second copy: %d queries, %d commands, %d exports, %d NARInfos", len(node.queries), node.adds, len(store.exports), store.infoCalls)
	}

	// Nothing asked: nothing done.
	st, err = nixserve.Copy(context.Background(), strings.NewReader(""), failWriter{}, nil, store)
	if err != nil || st != (nixserve.Stats{}) {
		t.Errorf("Copy of no paths: %+v, %v", st, err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("written") }

// TestCopyPartial: a node that holds part of the closure gets exactly the rest.
func TestCopyPartial(t *testing.T) {
	store, root := fakeClosure(30, 1000)
	closure, _ := store.Closure(context.Background(), []string{root})
	node := newFakeNode()
	part := storePath(1000+13, "leaf-13")
	if _, err, _ := copyTo(ctxFor(t, time.Minute), node, store, part, storePath(9998, "big")); err != nil {
		t.Fatal(err)
	}
	held := node.count()
	if held != 5 {
		t.Fatalf("node holds %d paths, want leaves 10-13 and big", held)
	}
	st, err, served := copyTo(ctxFor(t, time.Minute), node, store, root)
	if err != nil || served != nil {
		t.Fatalf("Copy: %v; node: %v", err, served)
	}
	if st.Paths != 32 || st.Missing != 32-held || st.Sent != 32-held {
		t.Errorf("stats %+v, want %d missing and sent", st, 32-held)
	}
	var want []string
	for _, p := range closure {
		if !slices.Contains(node.imported[:held], p) {
			want = append(want, p)
		}
	}
	if got := store.exports[len(store.exports)-1]; !slices.Equal(got, want) {
		t.Errorf("exported %d paths, want the %d missing", len(got), len(want))
	}
	checkNode(t, node, store, closure)
}

// TestCopyDrop cuts the node off after every so many bytes of a copy: what it
// holds then stays valid, and the next copy sends exactly what it does not hold.
func TestCopyDrop(t *testing.T) {
	store, root := fakeClosure(60, 200000)
	closure, _ := store.Closure(context.Background(), []string{root})
	full, err, _ := copyTo(ctxFor(t, time.Minute), newFakeNode(), store, root)
	if err != nil {
		t.Fatal(err)
	}
	cuts := []int64{1, 8, 16, 20, 40, 100, 1000}
	for c := int64(1); c < 50; c++ {
		cuts = append(cuts, full.Bytes*c/50)
	}
	cuts = append(cuts, full.Bytes-16, full.Bytes-8, full.Bytes-1)
	partial := 0
	for _, cut := range cuts {
		node := newFakeNode()
		node.dieAfter = cut
		st, err, served := copyTo(ctxFor(t, time.Minute), node, store, root)
		if err == nil || !errors.Is(served, errDied) {
			t.Errorf("cut at %d of %d bytes: Copy %v (stats %+v), node %v", cut, full.Bytes, err, st, served)
			continue
		}
		held := node.count()
		if held > st.Sent {
			t.Errorf("cut at %d: the node holds %d paths, Copy counts %d sent", cut, held, st.Sent)
		}
		if held > 0 && held < len(closure) {
			partial++
		}
		node.dieAfter = 0
		st, err, served = copyTo(ctxFor(t, time.Minute), node, store, root)
		if err != nil || served != nil {
			t.Fatalf("cut at %d: rerun: %v; node: %v", cut, err, served)
		}
		if st.Missing != len(closure)-held || st.Sent != st.Missing {
			t.Errorf("cut at %d: the node held %d of %d paths; the rerun: %+v", cut, held, len(closure), st)
		}
		checkNode(t, node, store, closure)
	}
	if partial < 30 {
		t.Errorf("only %d cuts left the node with part of the closure", partial)
	}
}

// TestCopyCancel cancels a copy in the middle of the export.
func TestCopyCancel(t *testing.T) {
	store, root := fakeClosure(30, 1000)
	store.block = 10
	node := newFakeNode()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		st  nixserve.Stats
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err, _ := copyTo(ctx, node, store, root)
		done <- result{st, err}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for node.count() < 10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	res := <-done
	if !errors.Is(res.err, context.Canceled) || res.st.Sent != 10 || node.count() != 10 {
		t.Fatalf("cancelled copy: %v, stats %+v, node holds %d", res.err, res.st, node.count())
	}
	store.block = 0
	st, err, _ := copyTo(ctxFor(t, time.Minute), node, store, root)
	if err != nil || st.Sent != 22 || st.Missing != 22 {
		t.Errorf("rerun: %+v, %v", st, err)
	}
}

// Issue 14 item 4: a closure of many small paths must not cost the node a write
// (an SSH packet, a TCP segment, a wakeup of its sshd and nix-store) per path. The
// local export is ahead of the node: its paths go out in full buffers.
func TestCopyBatchesSmallPaths(t *testing.T) {
	store, root := fakeClosure(500, 1000)
	store.oneWrite = true
	node := newFakeNode()
	st, writes, err, served := copyCounting(ctxFor(t, time.Minute), node, store, root)
	if err != nil || served != nil || st.Sent != 502 {
		t.Fatalf("Copy: %+v, %v; node: %v", st, err, served)
	}
	// The greeting, the query, the export in 64 KiB writes, the end.
	if max := 3 + int(st.Bytes>>16) + 2; writes > max {
		t.Errorf("%d writes to the node for %d paths in %d bytes, want at most %d", writes, st.Sent, st.Bytes, max)
	}
	closure, _ := store.Closure(context.Background(), []string{root})
	checkNode(t, node, store, closure)
}

// TestCopyStreams copies a path of 64 MiB: what Copy allocates stays far below.
func TestCopyStreams(t *testing.T) {
	const size = 64 << 20
	store, _ := fakeClosure(0, size)
	big := storePath(9998, "big")
	node := newFakeNode()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err, served := copyTo(ctxFor(t, time.Minute), node, store, big)
	runtime.ReadMemStats(&after)
	if err != nil || served != nil || st.Sent != 1 {
		t.Fatalf("Copy: %+v, %v; node: %v", st, err, served)
	}
	t.Logf("allocated %d KiB", (after.TotalAlloc-before.TotalAlloc)>>10)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Errorf("%d MiB allocated to copy %d MiB", alloc>>20, size>>20)
	}
	checkNode(t, node, store, []string{big})
	if node.store[big].narSize < size {
		t.Errorf("NAR of %d bytes", node.store[big].narSize)
	}
}

func TestCopyNodeErrors(t *testing.T) {
	store, root := fakeClosure(10, 100)
	closure, _ := store.Closure(context.Background(), []string{root})
	for name, c := range map[string]struct {
		mutate func(*fakeNode)
		want   string
	}{
		"not serve":      {func(n *fakeNode) { n.greeting = 0x1234 }, "not nix-store --serve"},
		"old protocol":   {func(n *fakeNode) { n.version = 0x105 }, "protocol 1.5"},
		"silent":         {func(n *fakeNode) { n.mute = true }, "did not answer the serve protocol's greeting"},
		"dies at once":   {func(n *fakeNode) { n.dieAfter = 1 }, "greeting the node: writing to the node"},
		"unasked answer": {func(n *fakeNode) { n.extraValid = storePath(7, "other") }, "not asked about"},
		// A node of protocol 2.4 gets one cmdImportPaths.
		"import refused":         {func(n *fakeNode) { n.ack, n.version = 2, 0x204 }, "answered the import with 2"},
		"dies on the NARs (2.4)": {func(n *fakeNode) { n.dieAfter, n.version = 2000, 0x204 }, "writing to the node"},
		"add refused":            {func(n *fakeNode) { n.ack = 2 }, "did not add " + closure[0] + " (0 of 12 missing paths added before it): the node answered 2, not 1"},
		"dies on the first NAR":  {func(n *fakeNode) { n.dieAfter = 1200 }, "did not add " + closure[0] + " (0 of 12"},
		"dies on the second NAR": {func(n *fakeNode) { n.dieAfter = 2800 }, "did not add " + closure[1] + " (1 of 12"},
	} {
		store, root := fakeClosure(10, 100)
		node := newFakeNode()
		c.mutate(node)
		_, err, _ := copyTo(ctxFor(t, time.Minute), node, store, root)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}

// TestCopyChecksExport: a local store whose export breaks the rules is stopped
// before the node adds the offending path.
func TestCopyChecksExport(t *testing.T) {
	for name, c := range map[string]struct {
		mutate func(*fakeStore)
		want   string
		held   int // paths the node holds afterwards
	}{
		"out of order": {func(s *fakeStore) {
			s.reorder = func(p []string) []string { slices.Reverse(p); return p }
		}, "comes before its reference", 0},
		"left out": {func(s *fakeStore) {
			s.reorder = func(p []string) []string { return p[:len(p)-1] }
		}, "1 of 13 paths left out", 12},
		"twice": {func(s *fakeStore) {
			s.reorder = func(p []string) []string { return append(p[:3], p[2:]...) }
		}, "comes twice", 3},
		"unasked": {func(s *fakeStore) {
			s.reorder = func(p []string) []string { return append([]string{storePath(1000, "leaf-0")}, p...) }
			s.closure = func(c []string) []string { return c[1:] }
		}, "not asked for", 0},
		"fails":         {func(s *fakeStore) { s.failAfter = 5 }, "local export: hash of path", 5},
		"closure fails": {func(s *fakeStore) { s.closureErr = errors.New("no such path") }, "no such path", 0},
		"closure without the root": {func(s *fakeStore) {
			s.closure = func(c []string) []string { return c[:len(c)-1] }
		}, "is not in it", 0},
		"closure not store paths": {func(s *fakeStore) {
			s.closure = func(c []string) []string { return append(c, "/tmp/x") }
		}, "not a store path", 0},
		"closure twice": {func(s *fakeStore) {
			s.closure = func(c []string) []string { return append(c, c[0]) }
		}, "comes twice", 0},
	} {
		store, root := fakeClosure(11, 100)
		c.mutate(store)
		node := newFakeNode()
		st, err, _ := copyTo(ctxFor(t, time.Minute), node, store, root)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
		if node.count() != c.held || st.Sent != c.held {
			t.Errorf("%s: the node holds %d paths, %d sent; want %d", name, node.count(), st.Sent, c.held)
		}
	}

	store, _ := fakeClosure(1, 1)
	for _, bad := range []string{"relative", "/nix/store/x", "--option"} {
		_, err := nixserve.Copy(context.Background(), strings.NewReader(""), failWriter{}, []string{bad}, store)
		if err == nil || !strings.Contains(err.Error(), "not a store path") {
			t.Errorf("Copy(%q): %v", bad, err)
		}
	}
}
