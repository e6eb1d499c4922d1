// Package methods runs a deployment method's verbs: it loads the tree, merges the
// submission, computes and writes the plans, then runs the verb with the ssh runner or
// the OpenTofu runner.
package methods
