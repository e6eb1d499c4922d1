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

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// substituteFrom is the Nix options that make a store substitute from c.
func substituteFrom(c *testbed.BinaryCache) []string {
	return []string{"--option", "substituters", c.URL, "--option", "trusted-public-keys", c.PublicKey}
}

// localServeWith is localServe with more options for the node's nix-store, and
// its input a pipe the command's end does not wait for, as a transport's: a node
// that ends while the copy waits for its answer (its substitution failed) ends
// the command at once, as an SSH session or an Incus exec does.
func localServeWith(dir string, options ...string) nixserve.RunFunc {
	return func(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
		args := append(append(slices.Clone(argv[1:]), "--store", dir), options...)
		cmd := exec.CommandContext(ctx, argv[0], args...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.WaitDelay = 5 * time.Second
		w, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		go func() {
			_, _ = io.Copy(w, stdin)
			_ = w.Close()
		}()
		err = cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ctx.Err() == nil {
			return ee.ExitCode(), nil
		}
		return 0, err
	}
}

// leafClosure is the leaves 0-9 of a closure of testdata/closure.nix: leaf 9's
// closure, half of a closure of 20 leaves.
func leafClosure(t *testing.T, closure []string) []string {
	t.Helper()
	for _, p := range closure {
		if strings.Contains(p, "-sy-copy-leaf-9-") {
			c, err := nixserve.LocalStore{}.Closure(context.Background(), []string{p})
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}
	t.Fatal("no leaf 9 in the closure")
	return nil
}

// Issue 34 item 1, against Nix 2.8's own nix-store --serve --write: with
// Substitute the node fetches from its binary cache the half of the closure the
// cache holds, and only the other half is streamed; without it everything is.
func TestServeSubstitute(t *testing.T) {
	needNixBuild(t)
	root, closure := buildTestClosure(t, "serve-subst", 20, 0)
	half := leafClosure(t, closure)
	cache := testbed.NewBinaryCache(t)
	cache.Hold(t, half...)
	ctx := ctxFor(t, 2*time.Minute)

	dir := filepath.Join(t.TempDir(), "node")
	st, err := nixserve.CopyThroughWith(ctx, localServeWith(dir, substituteFrom(cache)...), []string{root}, nil, nixserve.Options{Substitute: true})
	if err != nil {
		t.Fatal(err)
	}
	if st.Missing != len(closure) || st.Substituted != len(half) || st.Sent != len(closure)-len(half) || !st.Substitute || st.SubstituteFailed != "" {
		t.Errorf("stats %+v; want %d missing, %d from the cache, the other %d sent", st, len(closure), len(half), len(closure)-len(half))
	}
	if valid := validIn(t, dir, closure); len(valid) != len(closure) {
		t.Errorf("%d of %d paths valid on the node", len(valid), len(closure))
	}

	// Without Substitute the same node config streams all of it.
	dir = filepath.Join(t.TempDir(), "node")
	st, err = nixserve.CopyThroughWith(ctx, localServeWith(dir, substituteFrom(cache)...), []string{root}, nil, nixserve.Options{})
	if err != nil || st.Substituted != 0 || st.Sent != len(closure) || st.Substitute {
		t.Errorf("without substitution: %+v, %v; want all %d sent", st, err, len(closure))
	}
}

// A cache the node knows but cannot reach fails Nix's substitution (Nix 2.8 throws
// from the query, and nix-store --serve ends): the copy starts again without it
// and the deployer streams everything; the push line gets the node's words.
func TestServeSubstituteCacheDown(t *testing.T) {
	needNixBuild(t)
	root, closure := buildTestClosure(t, "serve-subst-down", 20, 0)
	half := leafClosure(t, closure)
	cache := testbed.NewBinaryCache(t)
	cache.Hold(t, half...)
	ctx := ctxFor(t, 2*time.Minute)

	// The node has used the cache before (Nix remembers it), then it goes down.
	known, _ := buildTestClosure(t, "serve-subst-known", 1, 0)
	cache.Hold(t, known)
	if _, err := nixserve.CopyThroughWith(ctx, localServeWith(filepath.Join(t.TempDir(), "node"), substituteFrom(cache)...),
		[]string{known}, nil, nixserve.Options{Substitute: true}); err != nil {
		t.Fatal(err)
	}
	cache.Down()

	dir := filepath.Join(t.TempDir(), "node")
	st, err := nixserve.CopyThroughWith(ctx, localServeWith(dir, substituteFrom(cache)...), []string{root}, nil, nixserve.Options{Substitute: true})
	if err != nil {
		t.Fatalf("copy with the cache down: %v", err)
	}
	if st.Missing != len(closure) || st.Sent != len(closure) || st.Substituted != 0 || !st.Substitute {
		t.Errorf("stats %+v; want all %d sent", st, len(closure))
	}
	t.Logf("the node's caches: %q", st.SubstituteFailed)
	if valid := validIn(t, dir, closure); len(valid) != len(closure) {
		t.Errorf("%d of %d paths valid on the node", len(valid), len(closure))
	}
}

// A node's answer to the substituting query is bounded by the question as the
// first one is: a path not asked about ends the copy (no second session).
func TestCopySubstituteHostileAnswer(t *testing.T) {
	store, root := fakeClosure(10, 1000)
	node := newFakeNode()
	node.extraValid = storePath(4242, "not-asked")
	_, err := copyWith(ctxFor(t, time.Minute), node, store, nixserve.Options{Substitute: true}, root)
	if err == nil || !strings.Contains(err.Error(), "not asked about") {
		t.Fatalf("Copy: %v; want the answer refused", err)
	}
	var se *nixserve.SubstituteError
	if errors.As(err, &se) {
		t.Errorf("the first query's refusal %v is no substitution's failure", err)
	}
}
