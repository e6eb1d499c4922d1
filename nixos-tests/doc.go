// Package nixostests checks the Nix files of the repository: flake.nix, flake.lock and
// the NixOS VM tests in this directory. The VM tests need nixpkgs and a binary cache,
// which the test bed lacks, so here they are only parsed; every scenario they assert
// is also covered by the container tests.
package nixostests
