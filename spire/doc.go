// Package spire registers workload identities with a SPIRE server: join tokens
// for nodes' agents and registration entries for their units.
package spire
