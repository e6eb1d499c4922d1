package effects

import (
	"context"
	"time"
)

// WithSeams sets the body's seams for the external tests: resolve stands for the
// build phase and poll is the pause between samples (nil and 0: the real thing).
func (d *Deploy) WithSeams(resolve func(context.Context, Source) (string, error), poll time.Duration) *Deploy {
	d.resolve, d.poll = resolve, poll
	return d
}

// LockWhere is this process's place on a lock line (lockHolder.Where).
func LockWhere() string { return lockIdentity().Where }

// SplitOwned cuts OwnedScript's output (splitOwned).
var SplitOwned = splitOwned
