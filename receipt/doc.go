// Package receipt is the signed record of one apply on one node (SPEC 6.8): an
// in-toto Statement v1 naming the toplevel and how it came to run, in a DSSE envelope
// signed with the deployer's own OpenSSH ed25519 key.
package receipt
