// Package dnsupdate reads and replaces DNS RRsets over RFC 2136 with TSIG.
package dnsupdate
