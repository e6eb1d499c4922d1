package nixserve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestArgvs(t *testing.T) {
	b := "/nix/store/11111111111111111111111111111111-b"
	argvs, err := requisitesArgvs("", []string{pathA, b})
	if want := [][]string{{"nix-store", "--query", "--requisites", pathA, b}}; err != nil || !reflect.DeepEqual(argvs, want) {
		t.Errorf("requisitesArgvs = %q, %v; want %q", argvs, err, want)
	}
	argvs, err = exportArgvs("/usr/bin/nix-store", []string{b, pathA})
	if want := [][]string{{"/usr/bin/nix-store", "--export", b, pathA}}; err != nil || !reflect.DeepEqual(argvs, want) {
		t.Errorf("exportArgvs = %q, %v; want %q", argvs, err, want)
	}
	for _, bad := range [][]string{nil, {}, {"--delete"}, {pathA, "-r"}, {"relative-00000000000000000000000000000000-a"}, {pathA + " x"}} {
		if argvs, err := exportArgvs("", bad); err == nil {
			t.Errorf("exportArgvs(%q) = %q, accepted", bad, argvs)
		}
		if argvs, err := requisitesArgvs("", bad); err == nil {
			t.Errorf("requisitesArgvs(%q) = %q, accepted", bad, argvs)
		}
	}
}

func TestArgvsChunked(t *testing.T) {
	var paths []string
	for i := 0; i < 10000; i++ {
		paths = append(paths, fmt.Sprintf("/nix/store/%032d-p%d", i, i))
	}
	argvs, err := exportArgvs("nix-store", paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(argvs) < 2 {
		t.Fatalf("%d command lines for %d paths", len(argvs), len(paths))
	}
	var all []string
	for _, argv := range argvs {
		if argv[0] != "nix-store" || argv[1] != "--export" {
			t.Fatalf("argv %q", argv[:2])
		}
		size := 0
		for _, p := range argv[2:] {
			size += len(p) + 1
		}
		if size > maxArgBytes {
			t.Errorf("a command line of %d bytes of paths, bound %d", size, maxArgBytes)
		}
		all = append(all, argv[2:]...)
	}
	if !slices.Equal(all, paths) {
		t.Error("the chunks do not keep the paths' order")
	}
}

func TestTail(t *testing.T) {
	var tl tail
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&tl, "line %d\n", i)
	}
	tl.Write([]byte("error: the last words\n\n  \n"))
	if len(tl.b) > 4096 || tl.lastLine() != "error: the last words" {
		t.Errorf("%d bytes kept, last line %q", len(tl.b), tl.lastLine())
	}
}

// needNix skips a test on a machine without Nix.
func needNix(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"nix-store", "nix-build"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not on PATH", tool)
		}
	}
}

// buildClosure builds testdata/closure.nix with n leaves and a big path of bigMiB.
func buildClosure(t *testing.T, tag string, n, bigMiB int) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nix-build", filepath.Join(filepath.Dir(file), "testdata", "closure.nix"),
		"--no-out-link", "--argstr", "tag", tag, "--arg", "n", fmt.Sprint(n), "--arg", "bigMiB", fmt.Sprint(bigMiB))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nix-build: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func nixStore(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("nix-store", args...).Output()
	if err != nil {
		t.Fatalf("nix-store %q: %v", args, err)
	}
	return string(out)
}

// TestLocalStore runs LocalStore against this machine's Nix: the closure in
// dependency order, and an export that keeps it, also over several commands.
func TestLocalStore(t *testing.T) {
	needNix(t)
	root := buildClosure(t, "local-store", 25, 0)
	ctx := context.Background()
	closure, err := LocalStore{}.Closure(ctx, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Fields(nixStore(t, "--query", "--requisites", root)); !slices.Equal(closure, want) || len(closure) != 27 {
		t.Fatalf("closure (%d paths) differs from nix-store's (%d)", len(closure), len(want))
	}
	db := parseDumpDB(t, nixStore(t, append([]string{"--dump-db"}, closure...)...))
	pos := map[string]int{}
	for i, p := range closure {
		pos[p] = i
	}
	for _, p := range closure {
		for _, r := range db[p].References {
			if r != p && pos[r] > pos[p] {
				t.Errorf("closure: %s before its reference %s", p, r)
			}
		}
	}
	// The closure of the root and one leaf, which is in it: each path once.
	again, err := LocalStore{}.Closure(ctx, []string{closure[0], root})
	if err != nil || len(again) != len(closure) {
		t.Errorf("closure of two roots: %d paths, %v", len(again), err)
	}

	for _, limit := range []int{maxArgBytes, 200} {
		t.Run(fmt.Sprintf("argv bound %d", limit), func(t *testing.T) {
			old := maxArgBytes
			maxArgBytes = limit
			defer func() { maxArgBytes = old }()
			resetSpool()
			var out bytes.Buffer
			if err := (LocalStore{}).Export(ctx, closure, &out); err != nil {
				t.Fatal(err)
			}
			if limit == old {
				// One command: exactly nix-store --export's bytes.
				direct, err := exec.Command("nix-store", append([]string{"--export"}, closure...)...).Output()
				if err != nil || !bytes.Equal(out.Bytes(), direct) {
					t.Errorf("export differs from nix-store --export (%d bytes, %d): %v", out.Len(), len(direct), err)
				}
			}
			// One stream: every path once, each after its references, with the
			// references and deriver Nix records.
			src := bufio.NewReader(&out)
			seen := map[string]bool{}
			for {
				marker, err := readUint64(src)
				if err != nil {
					t.Fatal(err)
				}
				if marker == 0 {
					break
				}
				if err := forwardNAR(src, &bytes.Buffer{}); err != nil {
					t.Fatal(err)
				}
				tr, err := readTrailer(src, len(closure))
				if err != nil {
					t.Fatal(err)
				}
				if seen[tr.Path] {
					t.Errorf("%s twice", tr.Path)
				}
				seen[tr.Path] = true
				if want := db[tr.Path].References; !slices.Equal(sorted(tr.References), want) {
					t.Errorf("%s: references %q, want %q", tr.Path, tr.References, want)
				}
				for _, r := range tr.References {
					if r != tr.Path && !seen[r] {
						t.Errorf("%s before its reference %s", tr.Path, r)
					}
				}
				if want := db[tr.Path].Deriver; tr.Deriver != want {
					t.Errorf("%s: deriver %q, want %q", tr.Path, tr.Deriver, want)
				}
			}
			if len(seen) != len(closure) || src.Buffered() != 0 {
				t.Errorf("%d of %d paths, %d bytes after the end", len(seen), len(closure), src.Buffered())
			}
		})
	}

	// Errors name the command and keep nix-store's own words.
	missing := "/nix/store/00000000000000000000000000000000-switchyard-not-there"
	if _, err := (LocalStore{}).Closure(ctx, []string{missing}); err == nil || !strings.Contains(err.Error(), "nix-store --query") ||
		!strings.Contains(err.Error(), "not-there") {
		t.Errorf("closure of a missing path: %v", err)
	}
	if err := (LocalStore{}).Export(ctx, []string{missing}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "nix-store --export") {
		t.Errorf("export of a missing path: %v", err)
	}
	if err := (LocalStore{Command: "switchyard-no-such-nix-store"}).Export(ctx, closure, &bytes.Buffer{}); err == nil {
		t.Error("export with a missing nix-store: no error")
	}
}

// pathInfo is what `nix-store --dump-db` records of a path.
type pathInfo struct {
	NarHash    string // base 16
	NarSize    string
	Deriver    string
	References []string // sorted
}

// parseDumpDB parses the output of `nix-store --dump-db paths...`: per path its
// name, NAR hash, NAR size, deriver, the count of references and the references.
func parseDumpDB(t testing.TB, out string) map[string]pathInfo {
	t.Helper()
	lines := strings.Split(out, "\n")
	db := map[string]pathInfo{}
	for i := 0; i+4 < len(lines) && lines[i] != ""; {
		p := lines[i]
		info := pathInfo{NarHash: lines[i+1], NarSize: lines[i+2], Deriver: lines[i+3]}
		var n int
		if _, err := fmt.Sscan(lines[i+4], &n); err != nil || i+5+n > len(lines) {
			t.Fatalf("dump-db: %q at line %d", lines[i+4], i+4)
		}
		info.References = sorted(lines[i+5 : i+5+n])
		db[p] = info
		i += 5 + n
	}
	return db
}

func sorted(list []string) []string {
	list = slices.Clone(list)
	slices.Sort(list)
	return list
}

// Issue 14 item 4: the nodes of a fleet share their closure's query. This machine's
// nix-store behind a wrapper that counts its runs: eight concurrent Closure calls of
// one toplevel run it once, and all get its answer; a failed query is not kept.
func TestLocalStoreClosureAskedOnce(t *testing.T) {
	needNix(t)
	root := buildClosure(t, "closure-once", 5, 0)
	real, err := exec.LookPath("nix-store")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	count, wrapper := filepath.Join(dir, "count"), filepath.Join(dir, "nix-store")
	script := "#!/bin/sh\necho run >> '" + count + "'\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "run")
	}
	want := strings.Fields(nixStore(t, "--query", "--requisites", root))
	s := LocalStore{Command: wrapper}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.Closure(context.Background(), []string{root})
			if err != nil || !slices.Equal(got, want) {
				t.Errorf("closure: %d paths, %v; want %d", len(got), err, len(want))
			}
		}()
	}
	wg.Wait()
	if n := runs(); n != 1 {
		t.Errorf("nix-store ran %d times for one toplevel, want 1", n)
	}
	missing := "/nix/store/00000000000000000000000000000000-switchyard-missing"
	for range 2 {
		if _, err := s.Closure(context.Background(), []string{missing}); err == nil {
			t.Fatal("closure of a missing path: no error")
		}
	}
	if n := runs(); n != 3 {
		t.Errorf("nix-store ran %d times, want 3: a failed query must not be kept", n)
	}
}
