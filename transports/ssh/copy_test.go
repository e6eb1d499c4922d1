package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// pauseAfter passes writes on to w until n bytes, then signals reached and waits
// for release.
type pauseAfter struct {
	w                io.Writer
	left             int64
	reached, release chan struct{}
	reachedOnce      sync.Once
}

func (p *pauseAfter) Write(b []byte) (int, error) {
	if p.left <= 0 || int64(len(b)) < p.left {
		n, err := p.w.Write(b)
		p.left -= int64(n)
		return n, err
	}
	n, err := p.w.Write(b[:p.left])
	p.left = 0
	if err != nil {
		return n, err
	}
	p.reachedOnce.Do(func() { close(p.reached) })
	<-p.release
	m, err := p.w.Write(b[n:])
	return n + m, err
}

// buildManyPaths builds the copy test closure of transports/nixserve: 200 small
// paths, one of 5 MiB, and a root; it returns the root and the closure.
func buildManyPaths(t *testing.T, tag string) (string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	expr := filepath.Join(testbed.RepoRoot(), "transports", "nixserve", "testdata", "closure.nix")
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "nix-build", expr, "--no-out-link", "--argstr", "tag", tag, "--arg", "n", "200", "--arg", "bigMiB", "5")
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

// invalidOn lists the paths node does not hold.
func invalidOn(t *testing.T, node *testbed.Node, paths []string) []string {
	t.Helper()
	return strings.Fields(node.MustExec(t, append([]string{"nix-store", "--check-validity", "--print-invalid"}, paths...)...))
}

// checkCopied checks that node holds closure valid, with contents that match the
// recorded hashes, and the same NAR hashes as this machine.
func checkCopied(t *testing.T, node *testbed.Node, closure []string) {
	t.Helper()
	node.MustExec(t, append([]string{"nix-store", "--check-validity"}, closure...)...)
	node.MustExec(t, append([]string{"nix-store", "--verify-path"}, closure...)...)
	remote := node.MustExec(t, append([]string{"nix-store", "--query", "--hash"}, closure...)...)
	local, err := exec.Command("nix-store", append([]string{"--query", "--hash"}, closure...)...).Output()
	if err != nil || remote != string(local) || len(strings.Fields(remote)) != len(closure) {
		t.Errorf("NAR hashes on the node differ from this machine's (%v)", err)
	}
}

// TestNodeCopyClosure copies a closure of 202 paths over the transport's one
// connection; the node's nix-store is killed in the middle of the copy, and the
// next copy sends exactly the paths the node still lacks; a copy of a present
// closure sends nothing.
func TestNodeCopyClosure(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	root, closure := buildManyPaths(t, "ssh")
	if len(closure) != 202 {
		t.Fatalf("closure of %d paths", len(closure))
	}
	tr, err := New(Config{User: "root", Host: "127.0.0.1", Port: node.SSHPort,
		KnownHostsFile: node.KnownHosts, KeyFiles: []string{node.KeyFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// 60 KiB into the copy (among the small paths, which come before the big
	// one), the copy waits; the node's nix-store --serve is killed; the copy goes on.
	pause := &pauseAfter{left: 60 << 10, reached: make(chan struct{}), release: make(chan struct{})}
	copyHooks.Store(tr, func(w io.Writer) io.Writer { pause.w = w; return pause })
	errc := make(chan error, 1)
	go func() { errc <- tr.CopyClosure(ctx, []string{root}) }()
	select {
	case <-pause.reached:
	case err := <-errc:
		t.Fatalf("the copy ended before 60 KiB: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatal("the copy never reached 60 KiB")
	}
	deadline := time.Now().Add(time.Minute)
	for len(invalidOn(t, node, closure)) == len(closure) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	node.MustExec(t, "pkill", "-f", "nix-store --serve")
	close(pause.release)
	err = <-errc
	copyHooks.Delete(tr)
	cut := tr.LastCopy()
	t.Logf("cut copy: %v; stats %+v", err, cut)
	if err == nil || !strings.Contains(err.Error(), "nix-store --serve on the node") {
		t.Fatalf("a copy whose nix-store was killed: %v", err)
	}
	if errors.Is(err, effects.ErrUnreachable) || strings.Contains(err.Error(), node.KeyFile) {
		t.Errorf("error %q", err)
	}
	invalid := invalidOn(t, node, closure)
	held := len(closure) - len(invalid)
	if held == 0 || len(invalid) == 0 || held > cut.Sent {
		t.Fatalf("after the cut the node holds %d of %d paths, %d sent", held, len(closure), cut.Sent)
	}

	if err := tr.CopyClosure(ctx, []string{root}); err != nil {
		t.Fatalf("rerun: %v", err)
	}
	if st := tr.LastCopy(); st.Paths != len(closure) || st.Missing != len(invalid) || st.Sent != len(invalid) {
		t.Errorf("rerun: stats %+v; the node lacked %d paths", st, len(invalid))
	}
	checkCopied(t, node, closure)

	start := time.Now()
	if err := tr.CopyClosure(ctx, []string{root}); err != nil {
		t.Fatalf("copy of a present closure: %v", err)
	}
	if st := tr.LastCopy(); st.Paths != len(closure) || st.Missing != 0 || st.Sent != 0 {
		t.Errorf("copy of a present closure: stats %+v", st)
	}
	t.Logf("copy of a present closure of %d paths: %v", len(closure), time.Since(start))
	if n := tr.dials.Load(); n != 1 {
		t.Errorf("%d TCP connections for three copies, want 1", n)
	}

	// A node without nix-store: the copy fails, naming the remote command.
	node.MustExec(t, "mv", "/usr/bin/nix-store", "/usr/bin/nix-store.off")
	err = tr.CopyClosure(ctx, []string{root})
	if err == nil || !strings.Contains(err.Error(), "nix-store --serve on the node exited 127") {
		t.Errorf("copy to a node without nix-store: %v", err)
	}
	if st := tr.LastCopy(); st.Sent != 0 {
		t.Errorf("copy to a node without nix-store: stats %+v", st)
	}
}

// TestNodeCopyClosureFresh copies a closure to a fresh node in one go and compares
// the time with nix-copy-closure's to another fresh node (logged, not asserted).
func TestNodeCopyClosureFresh(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node, ref := bed.Node(t), bed.Node(t)
	root, closure := buildManyPaths(t, "ssh-fresh")
	tr, err := New(Config{User: "root", Host: "127.0.0.1", Port: node.SSHPort,
		KnownHostsFile: node.KnownHosts, KeyFiles: []string{node.KeyFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Connect first, so that both timings leave out the handshake... of this one.
	if _, err := tr.Run(ctx, effects.Command{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := tr.CopyClosure(ctx, []string{root}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	st := tr.LastCopy()
	if st.Paths != len(closure) || st.Missing != len(closure) || st.Sent != len(closure) || st.Bytes < 5<<20 {
		t.Errorf("stats %+v", st)
	}
	checkCopied(t, node, closure)
	start = time.Now()
	ref.CopyClosure(t, root)
	t.Logf("%d paths, %s: %v; nix-copy-closure: %v", st.Sent, fmt.Sprintf("%.1f MiB", float64(st.Bytes)/(1<<20)), took, time.Since(start))
	if !slices.Equal(invalidOn(t, ref, closure), nil) {
		t.Error("nix-copy-closure left paths out")
	}
}
