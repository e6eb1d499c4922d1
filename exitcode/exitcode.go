package exitcode

// The exit codes of SPEC 2.1. A fleet's code is the highest of its nodes'. They
// are untyped so that they fit the int fields of verdicts, results and states.
const (
	OK      = 0 // every node passed
	Verdict = 1 // a verdict failed (a unit, the switch, the chain)
	Refused = 2 // refused before touching the node: bad input, a gate, a pinned key that does not match
	Infra   = 3 // unreachable, or systemd could not be read
)
