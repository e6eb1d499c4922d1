// Package spireserver starts a real SPIRE server on loopback for tests: join
// token attestation, an in-memory key manager and a SQLite datastore in a
// scratch directory, its API on a unix socket.
package spireserver
