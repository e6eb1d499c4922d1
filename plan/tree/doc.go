// Package tree is the operator tree on disk: resolving tree paths without letting them
// out (.., absolute, a symlink out), and collecting the files a node reads for its
// nixos_conf.
package tree
