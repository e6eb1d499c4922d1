// Package console writes a run for a person (SPEC 2.2): on a terminal, a block of live
// status lines, one per node, redrawn in place below the logs and verdicts printed
// above it; elsewhere, one line per finished phase.
package console
