package nixserve_test

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// Tests against this machine's own Nix 2.8 as the node: `nix-store --serve
// --write --store DIR` serves the protocol for an empty store of its own under
// DIR, so the real server checks every command, NAR hash and reference without a
// test-bed node.

// localServe is a RunFunc that runs argv here against the store under dir.
func localServe(dir string) nixserve.RunFunc {
	return func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		args := append(slices.Clone(argv[1:]), "--store", dir)
		cmd := exec.CommandContext(ctx, argv[0], args...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
		cmd.WaitDelay = 5 * time.Second
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			return ee.ExitCode(), nil
		}
		return 0, err
	}
}

// validIn gives the paths of closure that are valid in the store under dir.
func validIn(t *testing.T, dir string, closure []string) []string {
	t.Helper()
	invalid := strings.Fields(nixStoreOut(t, append([]string{"--store", dir, "--check-validity", "--print-invalid"}, closure...)...))
	var valid []string
	for _, p := range closure {
		if !slices.Contains(invalid, p) {
			valid = append(valid, p)
		}
	}
	return valid
}

// lyingStore is this machine's store with a wrong NAR hash for one path, or with
// a wrong deriver for it (deriver set), or a wrong NAR size (sizeBy added).
type lyingStore struct {
	nixserve.LocalStore
	about   string
	deriver string
	sizeBy  int
}

func (s lyingStore) NARInfos(ctx context.Context, paths []string) (map[string]nixserve.NARInfo, error) {
	m, err := s.LocalStore.NARInfos(ctx, paths)
	if info, ok := m[s.about]; ok {
		switch {
		case s.deriver != "":
			info.Deriver = s.deriver
		case s.sizeBy != 0:
			info.Size = uint64(int(info.Size) + s.sizeBy)
		default:
			info.Hash = strings.Repeat("0", 64)
		}
		m[s.about] = info
	}
	return m, err
}

// pathsLike gives the paths of closure whose name ends in suffix.
func pathsLike(closure []string, suffix string) []string {
	var out []string
	for _, p := range closure {
		if strings.HasSuffix(p, suffix) {
			out = append(out, p)
		}
	}
	return out
}

// dumpClosure builds a test closure of n leaves and its 1 MiB path (big[0]), which
// references every leaf.
func dumpClosure(t *testing.T, tag string, n int) (root string, closure, big, leaves []string) {
	t.Helper()
	needNixBuild(t)
	root, closure = buildTestClosure(t, tag, n, 1)
	big = pathsLike(closure, "-sy-copy-big-"+tag)
	for _, p := range closure {
		if strings.Contains(p, "-sy-copy-leaf-") {
			leaves = append(leaves, p)
		}
	}
	if len(big) != 1 || len(leaves) != n {
		t.Fatalf("closure %v", closure)
	}
	return root, closure, big, leaves
}

// Issue 35: a long path whose references the node holds goes from the store's
// dump, not its export (which would hash it here as well as on the node). On a
// node that lacks the references, the same path goes in the export.
func TestServeDumpsLongPaths(t *testing.T) {
	root, closure, big, leaves := dumpClosure(t, "serve-dump", 20)
	defer nixserve.SetDumpMin(512 << 10)()
	ctx := ctxFor(t, 2*time.Minute)
	for _, c := range []struct {
		name     string
		first    []string // copied before the root
		dumped   int
		exported bool // the big path went in the export
	}{
		{"references missing", nil, 0, true},
		{"references held", leaves, 1, false},
	} {
		nixserve.ResetSpool()
		wrapper, exported := countingNixStore(t)
		restore := nixserve.SetThroughStore(nixserve.LocalStore{Command: wrapper})
		dir := filepath.Join(t.TempDir(), "node")
		if c.first != nil {
			if _, err := nixserve.CopyThrough(ctx, localServe(dir), c.first, nil); err != nil {
				t.Fatal(err)
			}
		}
		st, err := nixserve.CopyThrough(ctx, localServe(dir), []string{root}, nil)
		restore()
		if err != nil || st.Dumped != c.dumped || st.Sent != len(closure)-len(c.first) {
			t.Errorf("%s: %+v, %v", c.name, st, err)
		}
		if got := slices.Contains(exported(), big[0]); got != c.exported {
			t.Errorf("%s: the long path in the export: %v, want %v", c.name, got, c.exported)
		}
		if valid := validIn(t, dir, closure); len(valid) != len(closure) {
			t.Fatalf("%s: %d of %d paths valid on the node", c.name, len(valid), len(closure))
		}
		local := nixStoreOut(t, "--query", "--hash", big[0])
		if node := nixStoreOut(t, "--store", dir, "--query", "--hash", big[0]); node != local {
			t.Errorf("%s: the long path's NAR hash on the node %q, here %q", c.name, node, local)
		}
	}
	nixserve.ResetSpool()
}

// A dumped NAR is checked as an exported one is: a wrong hash is refused by the
// node and named; a NAR shorter or longer than the store records ends the copy
// here, naming the path.
func TestServeDumpedNARChecked(t *testing.T) {
	root, closure, big, leaves := dumpClosure(t, "serve-dump-lie", 5)
	defer nixserve.SetDumpMin(512 << 10)()
	ctx := ctxFor(t, 2*time.Minute)
	for _, c := range []struct {
		name   string
		sizeBy int
		want   string
	}{
		{"wrong hash", 0, "hash mismatch"},
		{"shorter than recorded", 8, "the store records"},
		{"longer than recorded", -8, "is longer than"},
	} {
		nixserve.ResetSpool()
		dir := filepath.Join(t.TempDir(), "node")
		if _, err := nixserve.CopyThrough(ctx, localServe(dir), leaves, nil); err != nil {
			t.Fatal(err)
		}
		restore := nixserve.SetThroughStore(lyingStore{about: big[0], sizeBy: c.sizeBy})
		st, err := nixserve.CopyThrough(ctx, localServe(dir), []string{root}, nil)
		restore()
		// A NAR of the wrong size does not go out in full; one of the wrong hash
		// does, and the node refuses it.
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), big[0]) || (c.sizeBy != 0 && st.Dumped != 0) {
			t.Errorf("%s: %+v, %v", c.name, st, err)
		}
		if slices.Contains(validIn(t, dir, closure), big[0]) {
			t.Errorf("%s: the node holds the long path", c.name)
		}
	}
	nixserve.ResetSpool()
}

// TestServeStreamedNARChecked: a long NAR goes out before its trailer, under the
// path its length names; what the store said of that path is still checked. A wrong
// hash is refused by the node and named; a deriver the export's trailer does not
// give ends the copy there, on this side.
func TestServeStreamedNARChecked(t *testing.T) {
	needNixBuild(t)
	root, closure := buildTestClosure(t, "serve-streamed", 5, 1)
	var big string
	for _, p := range closure {
		if strings.HasSuffix(p, "-sy-copy-big-serve-streamed") {
			big = p
		}
	}
	if big == "" {
		t.Fatalf("no big path in %v", closure)
	}
	ctx := ctxFor(t, 2*time.Minute)
	for _, c := range []struct {
		name, deriver, want string
	}{
		{"wrong hash", "", "hash mismatch"},
		{"wrong deriver", "/nix/store/00000000000000000000000000000000-other.drv", "references or deriver of " + big + " are not the store's"},
	} {
		dir := filepath.Join(t.TempDir(), "node")
		restore := nixserve.SetThroughStore(lyingStore{about: big, deriver: c.deriver})
		st, err := nixserve.CopyThrough(ctx, localServe(dir), []string{root}, nil)
		restore()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), big) {
			t.Errorf("%s: %+v, %v", c.name, st, err)
		}
		if c.deriver != "" && st.Streamed != 0 {
			t.Errorf("%s: a path whose trailer disagreed counted as sent (%+v)", c.name, st)
		}
	}
}

// TestServeAddToStoreNar copies a closure into a store served by Nix 2.8's own
// nix-store --serve --write: every path arrives valid with its NAR hash, one
// cmdAddToStoreNar each; a second copy sends nothing.
func TestServeAddToStoreNar(t *testing.T) {
	needNixBuild(t)
	root, closure := buildTestClosure(t, "serve-add", 40, 1)
	dir := filepath.Join(t.TempDir(), "node")
	ctx := ctxFor(t, 2*time.Minute)
	st, err := nixserve.CopyThrough(ctx, localServe(dir), []string{root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The 1 MiB path is longer than a copy holds in memory: its length names it
	// before its trailer, and it goes out as it is read.
	if st.Paths != len(closure) || st.Missing != len(closure) || st.Sent != len(closure) || st.Streamed != 1 || st.Bytes < 1<<20 {
		t.Errorf("stats %+v for %d paths", st, len(closure))
	}
	if valid := validIn(t, dir, closure); len(valid) != len(closure) {
		t.Fatalf("%d of %d paths valid on the node", len(valid), len(closure))
	}
	local := strings.Fields(nixStoreOut(t, append([]string{"--query", "--hash"}, closure...)...))
	node := strings.Fields(nixStoreOut(t, append([]string{"--store", dir, "--query", "--hash"}, closure...)...))
	if !slices.Equal(local, node) {
		t.Errorf("NAR hashes differ on the node")
	}
	refs := nixStoreOut(t, "--store", dir, "--query", "--references", root)
	if want := nixStoreOut(t, "--query", "--references", root); refs != want {
		t.Errorf("references of the root on the node %q, want %q", refs, want)
	}
	st, err = nixserve.CopyThrough(ctx, localServe(dir), []string{root}, nil)
	if err != nil || st.Missing != 0 || st.Sent != 0 {
		t.Errorf("second copy: %+v, %v", st, err)
	}
}

// TestServeAddToStoreNarFails: a NAR the node refuses (its hash is not the one
// announced) ends nix-store on the node in the middle of the pipe. The error names
// that path and keeps Nix's words; every path the node confirmed before it stays
// valid, and the next copy sends only the rest.
func TestServeAddToStoreNarFails(t *testing.T) {
	needNixBuild(t)
	root, closure := buildTestClosure(t, "serve-fail", 30, 0)
	liar := closure[len(closure)/2]
	dir := filepath.Join(t.TempDir(), "node")
	ctx := ctxFor(t, 2*time.Minute)

	restore := nixserve.SetThroughStore(lyingStore{about: liar})
	st, err := nixserve.CopyThrough(ctx, localServe(dir), []string{root}, nil)
	restore()
	if err == nil || !strings.Contains(err.Error(), "copy: adding "+liar+": nix-store --serve on the node exited 1") ||
		!strings.Contains(err.Error(), "hash mismatch") {
		t.Fatalf("copy with a wrong hash for %s: %v", liar, err)
	}
	valid := validIn(t, dir, closure)
	if slices.Contains(valid, liar) || len(valid) == 0 || len(valid) >= len(closure) || len(valid) > st.Sent {
		t.Fatalf("after the failure %d of %d paths valid (%d sent), the refused one among them: %v", len(valid), len(closure), st.Sent, slices.Contains(valid, liar))
	}
	t.Logf("%v", err)

	st, err = nixserve.CopyThrough(ctx, localServe(dir), []string{root}, nil)
	if err != nil || st.Missing != len(closure)-len(valid) || st.Sent != st.Missing {
		t.Fatalf("copy after the failure: %+v, %v; %d were valid", st, err, len(valid))
	}
	if valid := validIn(t, dir, closure); len(valid) != len(closure) {
		t.Errorf("%d of %d valid after the second copy", len(valid), len(closure))
	}
}

func nixStoreOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("nix-store", args...).Output()
	if err != nil {
		t.Fatalf("nix-store %q: %v", args, err)
	}
	return string(out)
}

func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}
