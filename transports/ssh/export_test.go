package ssh

import (
	"context"

	"github.com/switchyard-nix/switchyard/effects"
)

// Dials is how many TCP connections t has made.
func Dials(t *Transport) int64 { return t.dials.Load() }

// RunWide runs cmd as the copy's command runs: its stdin widened first (wideStdin).
func RunWide(t *Transport, ctx context.Context, cmd effects.Command) (int, error) {
	return bulkRunner{t}.Run(ctx, cmd)
}
