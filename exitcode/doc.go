// Package exitcode holds the exit codes of SPEC 2.1, the one set every layer uses.
package exitcode
