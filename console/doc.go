// Package console draws a block of live status lines on a terminal, redrawn in place
// below whatever else is printed.
package console
