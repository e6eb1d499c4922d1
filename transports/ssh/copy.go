package ssh

import (
	"context"
	"io"
	"sync"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// copyHooks holds, for tests, a function per Transport that wraps what its
// copies write to the node.
var copyHooks sync.Map // *Transport -> func(io.Writer) io.Writer

// CopyClosure makes paths and their closures valid on the node: `nix-store --serve
// --write` runs on the node as one session of the transport's connection, is asked
// once which paths of the closure it holds, and gets the missing ones streamed in
// dependency order (nixserve.Copy, with this machine's Nix as the local store).
// The node adds each path as it arrives, so after a cut the next copy sends only
// what is still missing. A host key mismatch refuses the node (effects.ErrRefused)
// before anything is sent. LastCopy tells what the copy did.
func (t *Transport) CopyClosure(ctx context.Context, paths []string) error {
	var wrap func(io.Writer) io.Writer
	if hook, ok := copyHooks.Load(t); ok {
		wrap = hook.(func(io.Writer) io.Writer)
	}
	st, err := nixserve.CopyThrough(ctx, t.run, paths, wrap)
	t.lastCopy.Set(st)
	return err
}

// run is Run as nixserve.CopyThrough calls it.
func (t *Transport) run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	return t.Run(ctx, effects.Command{Argv: argv, Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// LastCopy tells what the transport's last CopyClosure did: the paths of the
// closure, how many the node lacked, how many were sent and the bytes written.
// After a failed copy it holds what was done before the failure.
func (t *Transport) LastCopy() nixserve.Stats { return t.lastCopy.Get() }

// CopyCounts is LastCopy for the deploy body (effects.CopyCounter).
func (t *Transport) CopyCounts() (paths, missing, sent int, bytes int64) {
	st := t.LastCopy()
	return st.Paths, st.Missing, st.Sent, st.Bytes
}
