// Package transports builds the transport that reaches a node (Open); each way (ssh, incus, shell) is a subpackage.
package transports
