// Package effects is the deploy body: the ordered phase table of SPEC 4.1 run over a
// node's Transport, the verdict-only pass, the node lock and its fence, the per-node
// journal, and the switch's confirmation over a fresh connection (SPEC 4.6).
package effects
