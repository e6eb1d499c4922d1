// Package transports holds the ways switchyard reaches a node (ssh, incus, shell), one subpackage each.
package transports
