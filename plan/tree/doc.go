// Package tree is the operator tree on disk: resolving tree paths without letting them
// out (.., absolute, a symlink out), collecting every file of the tree for nixos_conf
// (any of them may be read by a node's evaluation), identifying a path outside it by
// its content (nixpkgs), and finding environment reads in Nix source.
package tree
