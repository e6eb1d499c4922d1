// Package node holds what every transport to a NixOS node shares: its errors, the closure copy, the bootloader steps.
package node
