package ssh

import (
	"context"
	"io"
	"sync"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/node"
)

// copyHooks holds, for tests, a function per Transport that wraps what its
// copies write to the node.
var copyHooks sync.Map // *Transport -> func(io.Writer) io.Writer

// CopyClosure makes paths and their closures valid on the node (node.CopyClosure),
// `nix-store --serve --write` running as one session of the transport's connection.
// A host key mismatch refuses the node (effects.ErrRefused) before anything is
// sent. LastCopy tells what the copy did.
func (t *Transport) CopyClosure(ctx context.Context, paths []string) error {
	var wrap func(io.Writer) io.Writer
	if hook, ok := copyHooks.Load(t); ok {
		wrap = hook.(func(io.Writer) io.Writer)
	}
	return node.CopyClosure(ctx, bulkRunner{t}, &t.Copies, paths, wrap, t.cfg.CopyIdle, !t.cfg.NoSubstitute)
}

// bulkRunner runs the copy's `nix-store --serve --write` with a wide stdin pipe
// (wideStdin): the closure's NARs are the one bulk stream a deploy sends. It is
// not bounded as Run's commands are: node.CopyClosure bounds the copy by its
// silence instead, and nixserve reads the node's answers within bounds of its own.
type bulkRunner struct{ t *Transport }

func (b bulkRunner) Run(ctx context.Context, cmd effects.Command) (int, error) {
	return b.t.run(ctx, cmd, true)
}
