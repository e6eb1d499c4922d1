package incus

import (
	"context"

	"github.com/switchyard-nix/switchyard/transports/node"
)

// CopyClosure makes paths and their closures valid on the instance
// (node.CopyClosure), `nix-store --serve --write` running there as one exec.
// LastCopy tells what the copy did.
func (t *Transport) CopyClosure(ctx context.Context, paths []string) error {
	return node.CopyClosure(ctx, bulkRunner{t}, &t.Copies, paths, nil, t.cfg.CopyIdle, !t.cfg.NoSubstitute)
}
