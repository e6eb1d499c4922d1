// Package field names places in structured input (deployment.nix, DEPLOYMENT, plan.json)
// and carries refusals that point at them.
//
// Every refusal of switchyard's input is an *Error: the command maps it to exit 2
// (refused before anything changed, SPEC 2.1), and its message names the source and the
// field path, e.g. `DEPLOYMENT: deployment-method.ssh.applications.blog: unknown application`.
package field
