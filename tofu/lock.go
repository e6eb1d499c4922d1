package tofu

import (
	"errors"
	"fmt"
	"strings"
)

// ErrStateLocked is OpenTofu refusing to run because another run holds the state's
// lock: nothing was changed by this run.
var ErrStateLocked = errors.New("the OpenTofu state is locked by another run (try again when it has finished)")

// lockSummary is the summary of the diagnostic OpenTofu (and Terraform) gives when
// the state lock is held (internal/command/clistate: "Error acquiring the state
// lock"). OpenTofu has no exit code or error type of its own for it, and
// terraform-exec dropped its typed errors, so these words are the only sign: this
// file is the one place that reads them.
const lockSummary = "Error acquiring the state lock"

// LockError is ErrStateLocked (wrapping err) when OpenTofu failed with err on the
// state lock, as its -json stream said (sawLock) or its error output says; else nil.
func LockError(sawLock bool, err error) error {
	if err == nil || !(sawLock || strings.Contains(err.Error(), lockSummary)) {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrStateLocked, err)
}
