# The NixOS VM tests of SPEC 8, one file each, as an attribute set keyed by their names.
# flake.nix adds them to each system's `checks`:
#
#   checks.<system> = { ... } // import ./nixos-tests { inherit pkgs self; };
#
# `pkgs` is nixpkgs for that system, `self` the flake (the tests deploy
# self.packages.<system>.default and use self.nixosModules). Each file is a test module
# for pkgs.testers.runNixOSTest; common.nix holds what they share. They need KVM and
# build NixOS systems, so they run with `nix flake check` or `nix build
# .#checks.x86_64-linux.<name>` on a machine with Nix and nixpkgs, not on the test bed.
{ pkgs, self }:
let
  test = file: pkgs.testers.runNixOSTest (import file { inherit pkgs self; });
in
{
  deployment-verdict-failed = test ./deployment-verdict-failed.nix;
  deployment-verdict-loop = test ./deployment-verdict-loop.nix;
  deployment-verdict-spawn = test ./deployment-verdict-spawn.nix;
  deployment-verdict-chain = test ./deployment-verdict-chain.nix;
  deployment-unit-parsers = test ./deployment-unit-parsers.nix;
  deployment-ssh-hosts = test ./deployment-ssh-hosts.nix;
  deployment-nixos-hosts = test ./deployment-nixos-hosts.nix;
  deployment-eval-cache = test ./deployment-eval-cache.nix;
}
