// Package dnsserver starts real authoritative DNS servers (bind9 or knot) on loopback for tests,
// each with a TSIG key allowed to update its zone.
package dnsserver
