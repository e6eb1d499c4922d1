// Package verdict reads systemd state from a node, classifies its units and reports the verdict of SPEC 4.5.
package verdict
