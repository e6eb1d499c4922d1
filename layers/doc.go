// Package layers pins which of switchyard's packages may import which (its test is the rule; it has no code).
package layers
