// Package definition loads an operator tree's deployment definition (SPEC 6.1):
// deployment.nix (evaluated with nix-instantiate to data) or deployment.json. Unknown
// fields anywhere are refused, as are names that cannot be node or application names,
// module paths that leave the tree (.., absolute, a symlink out) or do not exist, and
// values that are not data; every refusal is a *field.Error naming the field path.
package definition
