package effects

import (
	"time"

	"github.com/switchyard-nix/switchyard/verdict"
)

// PhaseState is where a phase is: SPEC 2.2's start|done|skipped|failed.
type PhaseState string

const (
	PhaseStart   PhaseState = "start"
	PhaseDone    PhaseState = "done"
	PhaseSkipped PhaseState = "skipped"
	PhaseFailed  PhaseState = "failed"
)

// Reporter receives what the body does, as it happens. It is declared here, where
// it is consumed; the command line implements text and JSON forms. Implementations
// must be safe for concurrent use by several nodes' bodies.
type Reporter interface {
	Phase(node, phase string, state PhaseState, elapsed time.Duration)
	Log(node, level, msg string)
	Verdict(v verdict.Verdict)
}

// CopyReporter is a Reporter that also shows how many bytes a node's copy sent (a
// terminal's status line does).
type CopyReporter interface {
	Copied(node string, bytes int64)
}
