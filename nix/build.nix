# switchyard: a node's system toplevel from its generated files (SPEC 6.1, 6.3).
#
#   nix-instantiate build.nix --argstr tree /abs/tree --argstr nodeDir /abs/state/nodes/web1 \
#     --argstr system nixos --argstr nixpkgs /nix/store/...-source -A toplevel
#
# `system` is the deployment's: "nixos" evaluates the generated configuration.nix with
# nixpkgs' NixOS (nixos/lib/eval-config.nix, what nixpkgs.lib.nixosSystem calls); anything
# else is a path in the tree naming a builder `{ configuration, plan }: <toplevel>`, where
# `configuration` is the generated configuration.nix and `plan` the parsed plan.json with
# tree paths restored. A builder is how trees build without nixpkgs (the test trees).
{ tree, nodeDir, system ? "nixos", nixpkgs ? "" }:
let
  switchyard = import ./lib.nix;
  treeRoot = /. + tree;
  node = /. + nodeDir;
  configuration = node + "/configuration.nix";
  plan = switchyard.readPlan treeRoot (node + "/plan.json");

  nixos =
    if nixpkgs == "" then throw "switchyard: system = \"nixos\" needs `nixpkgs` in the deployment definition"
    else (import (/. + nixpkgs + "/nixos/lib/eval-config.nix") {
      # Only a default (mkDefault nixpkgs.system): nixpkgs.hostPlatform set by the
      # node's modules decides, as with nixpkgs.lib.nixosSystem.
      system = builtins.currentSystem;
      modules = [ configuration ];
    }).config.system.build.toplevel;

  built = import (switchyard.treePath treeRoot system) { inherit configuration plan; };
in
{
  inherit plan configuration;
  toplevel = if system == "nixos" then nixos else built;
}
