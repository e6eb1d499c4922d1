package nixserve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// Tests against real nodes of the test bed: the node's own Nix 2.8 serves the
// protocol (`nix-store --serve --write`), reached here through `incus exec`, and
// this machine's Nix is the local store.

// buildTestClosure builds testdata/closure.nix and returns the root and the
// closure in the local store's order.
func buildTestClosure(t *testing.T, tag string, n, bigMiB int) (string, []string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nix-build", filepath.Join(filepath.Dir(file), "testdata", "closure.nix"),
		"--no-out-link", "--argstr", "tag", tag, "--arg", "n", fmt.Sprint(n), "--arg", "bigMiB", fmt.Sprint(bigMiB))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nix-build: %v\n%s", err, stderr.String())
	}
	root := strings.TrimSpace(stdout.String())
	closure, err := nixserve.LocalStore{}.Closure(ctx, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	return root, closure
}

var (
	bigClosureOnce sync.Once
	bigRoot        string
	bigClosure     []string
)

// manyPaths is the closure the node tests share: 200 small paths and one of 5 MiB.
func manyPaths(t *testing.T) (string, []string) {
	bigClosureOnce.Do(func() { bigRoot, bigClosure = buildTestClosure(t, "nixserve", 200, 5) })
	if bigRoot == "" {
		t.Fatal("the test closure was not built")
	}
	return bigRoot, bigClosure
}

// copyByIncus copies paths into node with `incus exec node -- nix-store --serve
// --write`; wrap, when set, wraps the command's standard input.
func copyByIncus(t *testing.T, node *testbed.Node, paths []string, wrap func(io.Writer) io.Writer) (nixserve.Stats, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "incus", "exec", node.Name, "--", "nix-store", "--serve", "--write")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var w io.Writer = stdin
	if wrap != nil {
		w = wrap(stdin)
	}
	st, err := nixserve.Copy(ctx, stdout, w, paths, nixserve.LocalStore{})
	stdin.Close()
	// The rest of the node's output, so that Wait can return.
	_, _ = io.Copy(io.Discard, stdout)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("remote nix-store --serve: %v: %s", werr, strings.TrimSpace(stderr.String()))
	}
	return st, err
}

// invalidOn lists the paths node does not hold.
func invalidOn(t *testing.T, node *testbed.Node, paths []string) []string {
	t.Helper()
	out := node.MustExec(t, append([]string{"nix-store", "--check-validity", "--print-invalid"}, paths...)...)
	return strings.Fields(out)
}

// checkCopied checks that node holds closure exactly as the local store does:
// valid, contents matching the recorded hashes, and the same NAR hash, size,
// references and deriver.
func checkCopied(t *testing.T, node *testbed.Node, closure []string) {
	t.Helper()
	node.MustExec(t, append([]string{"nix-store", "--check-validity"}, closure...)...)
	node.MustExec(t, append([]string{"nix-store", "--verify-path"}, closure...)...)
	remote := nixserve.ParseDumpDB(t, node.MustExec(t, append([]string{"nix-store", "--dump-db"}, closure...)...))
	out, err := exec.Command("nix-store", append([]string{"--dump-db"}, closure...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	local := nixserve.ParseDumpDB(t, string(out))
	if len(local) != len(closure) || len(remote) != len(closure) {
		t.Fatalf("dump-db: %d paths here, %d on the node, of %d", len(local), len(remote), len(closure))
	}
	for _, p := range closure {
		l, r := local[p], remote[p]
		if l.NarHash != r.NarHash || l.NarSize != r.NarSize || l.Deriver != r.Deriver || !slices.Equal(l.References, r.References) {
			t.Errorf("%s differs on the node:\n here %+v\n node %+v", p, l, r)
		}
	}
}

func TestNodeCopy(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	root, closure := manyPaths(t)
	if len(closure) != 202 {
		t.Fatalf("closure of %d paths", len(closure))
	}

	st, err := copyByIncus(t, node, []string{root}, nil)
	if err != nil {
		t.Fatalf("Copy: %v (stats %+v)", err, st)
	}
	if st.Paths != 202 || st.Missing != 202 || st.Sent != 202 || st.Bytes < 5<<20 {
		t.Errorf("stats %+v", st)
	}
	checkCopied(t, node, closure)
	var leaf string
	for _, p := range closure {
		if strings.HasSuffix(p, "-sy-copy-leaf-7-nixserve") {
			leaf = p
		}
	}
	if out := node.MustExec(t, leaf+"/bin/hello"); out != "leaf 7\n" {
		t.Errorf("%s/bin/hello on the node: %q", leaf, out)
	}

	// Again: nothing is missing, nothing is sent.
	st, err = copyByIncus(t, node, []string{root}, nil)
	if err != nil {
		t.Fatalf("second Copy: %v", err)
	}
	if want := (nixserve.Stats{Paths: 202, Bytes: st.Bytes}); st != want {
		t.Errorf("second copy: stats %+v", st)
	}
}

// cutAfter fails every write after n bytes, as a dropped connection does.
type cutAfter struct {
	w    io.Writer
	left int64
}

var errCut = errors.New("connection cut")

func (c *cutAfter) Write(p []byte) (int, error) {
	if int64(len(p)) <= c.left {
		n, err := c.w.Write(p)
		c.left -= int64(n)
		return n, err
	}
	n, _ := c.w.Write(p[:c.left])
	c.left = 0
	return n, errCut
}

// TestNodeCopyCut cuts copies off at several points: the node keeps every path it
// received whole, and the next copy sends exactly the paths it still lacks.
func TestNodeCopyCut(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	root, closure := manyPaths(t)

	// 60 KiB: within the small paths, which all come before the big one; then
	// 3 MiB: within the big one; each time on top of what the node holds.
	for _, cut := range []int64{60 << 10, 3 << 20} {
		before := len(closure) - len(invalidOn(t, node, closure))
		st, err := copyByIncus(t, node, []string{root}, func(w io.Writer) io.Writer { return &cutAfter{w: w, left: cut} })
		if !errors.Is(err, errCut) {
			t.Fatalf("cut at %d bytes: %v (stats %+v)", cut, err, st)
		}
		invalid := invalidOn(t, node, closure)
		held := len(closure) - len(invalid)
		t.Logf("cut at %d bytes: %d paths sent, the node holds %d of %d", cut, st.Sent, held, len(closure))
		if held <= before || len(invalid) == 0 || held > before+st.Sent {
			t.Fatalf("cut at %d bytes: the node holds %d paths (before %d), %d sent", cut, held, before, st.Sent)
		}
		node.MustExec(t, append([]string{"nix-store", "--verify-path"}, validOf(closure, invalid)...)...)
	}

	invalid := invalidOn(t, node, closure)
	st, err := copyByIncus(t, node, []string{root}, nil)
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if st.Missing != len(invalid) || st.Sent != len(invalid) {
		t.Errorf("rerun: stats %+v; the node lacked %d paths", st, len(invalid))
	}
	checkCopied(t, node, closure)
}

func validOf(closure, invalid []string) []string {
	var valid []string
	for _, p := range closure {
		if !slices.Contains(invalid, p) {
			valid = append(valid, p)
		}
	}
	return valid
}
