package incus

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// serveArgv is the instance's side of a copy: Nix's serve protocol on its
// standard input and output, with the right to add paths.
var serveArgv = []string{"nix-store", "--serve", "--write"}

// errServeEnded is what a copy's writes get once the remote command has ended.
var errServeEnded = errors.New("nix-store --serve on the node has ended")

// CopyClosure makes paths and their closures valid on the instance: `nix-store
// --serve --write` runs there as one exec, is asked once which paths of the
// closure it holds, and gets the missing ones streamed in dependency order
// (nixserve.Copy, with this machine's Nix as the local store). The instance
// adds each path as it arrives, so after a cut the next copy sends only what is
// still missing. LastCopy tells what the copy did.
func (t *Transport) CopyClosure(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		t.setLastCopy(nixserve.Stats{})
		return nil
	}
	st, err := t.copyClosure(ctx, paths, nixserve.LocalStore{})
	t.setLastCopy(st)
	return err
}

func (t *Transport) copyClosure(ctx context.Context, paths []string, local nixserve.Store) (nixserve.Stats, error) {
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	stderr := &stream.Tail{}
	type result struct {
		code int
		err  error
	}
	ran := make(chan result, 1)
	go func() {
		code, err := t.Run(ctx, effects.Command{Argv: serveArgv, Stdin: stdinR, Stdout: stdoutW, Stderr: stderr})
		// The command has ended (or never started): its output ends, and what the
		// copy still writes to it fails.
		_ = stdoutW.CloseWithError(errServeEnded)
		_ = stdinR.CloseWithError(errServeEnded)
		ran <- result{code, err}
	}()

	// The greeting goes out before any local work: an instance that cannot be
	// reached fails the copy before the closure is computed.
	st, copyErr := nixserve.Copy(ctx, stdoutR, stdinW, paths, local)
	// End of input: the instance's nix-store ends, after the last command or,
	// when the copy broke off, in the middle of a path, which it then drops.
	_ = stdinW.Close()
	// Whatever the instance still says goes nowhere, so the exec can end.
	go func() { _, _ = io.Copy(io.Discard, stdoutR) }()
	res := <-ran

	switch {
	case res.err != nil:
		// Not run, or the daemon failed: the transport's own error, which says
		// so (effects.ErrUnreachable, ctx.Err()).
		return st, fmt.Errorf("copy: %w", res.err)
	case res.code != 0:
		msg := fmt.Sprintf("nix-store --serve on the node exited %d", res.code)
		if last := stderr.LastLine(); last != "" {
			msg += ": " + last
		}
		if copyErr == nil || errors.Is(copyErr, errServeEnded) {
			return st, fmt.Errorf("copy: %s (%d of %d missing paths sent)", msg, st.Sent, st.Missing)
		}
		return st, fmt.Errorf("copy: %w (%s)", copyErr, msg)
	case copyErr != nil:
		return st, fmt.Errorf("copy: %w", copyErr)
	}
	return st, nil
}

// LastCopy tells what the transport's last CopyClosure did: the paths of the
// closure, how many the instance lacked, how many were sent and the bytes
// written. After a failed copy it holds what was done before the failure.
func (t *Transport) LastCopy() nixserve.Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastCopy
}

// CopyCounts is LastCopy for the deploy body (effects.CopyCounter).
func (t *Transport) CopyCounts() (paths, missing, sent int, bytes int64) {
	st := t.LastCopy()
	return st.Paths, st.Missing, st.Sent, st.Bytes
}

func (t *Transport) setLastCopy(st nixserve.Stats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastCopy = st
}
