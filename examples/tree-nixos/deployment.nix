# An example operator tree built with real NixOS (SPEC 6.1, `system = "nixos"`): one
# group of Incus nodes made and deployed by the tf-incus method, a container (web1)
# and a virtual machine (vm1), both running the `hello` application.
#
#   switchyard tf-incus names --tree examples/tree-nixos
#   switchyard tf-incus plan  --tree examples/tree-nixos --out plan.json
#   NIX_PATH=nixpkgs=/path/to/nixpkgs switchyard tf-incus apply --tree examples/tree-nixos
#
# The generated configuration.nix of each node imports nixpkgs' module for its instance
# type (`incus.type`): virtualisation/lxc-container.nix for a container (the default),
# virtualisation/incus-virtual-machine.nix for "virtual-machine". The images are
# nixpkgs' own Incus images (or any image whose instance boots NixOS).
#
# `nixpkgs` is a plain path: the `nixpkgs` entry of NIX_PATH (`-I nixpkgs=...`, a
# channel), kept as a path and never copied. deployment.nix is imported without
# arguments, so a flake input cannot reach it directly: an operator tree that is a
# flake puts its input on NIX_PATH (e.g. `NIX_PATH=nixpkgs=${inputs.nixpkgs}` in its dev
# shell). Without a nixpkgs entry on NIX_PATH the tree still lists and plans its nodes;
# only building them is refused ("needs `nixpkgs`").
let
  # <nixpkgs> when NIX_PATH can resolve it, else null (never an evaluation error).
  hasNixpkgs = builtins.any
    (e: e.prefix == "nixpkgs"
      || (e.prefix == "" && builtins.substring 0 1 e.path == "/" && builtins.pathExists (e.path + "/nixpkgs")))
    builtins.nixPath;
in
{
  domain = "example.org";
  email = "ops@example.org";
  system = "nixos";
  nixpkgs = if hasNixpkgs then <nixpkgs> else null;

  applications = {
    hello = {
      enable = true;
      module = "apps/hello.nix";
      settings = { greeting = "hi"; };
    };
  };

  groups.web = {
    applications = [ "hello" ];
    nodes.web1 = {
      modules = [ "hosts/web1.nix" ];
      incus = { image = "nixos/26.05"; limits = { cpu = 1; memory = "1GiB"; }; };
    };
    nodes.vm1 = {
      modules = [ "hosts/vm1.nix" ];
      incus = { image = "nixos/26.05/vm"; type = "virtual-machine"; limits = { cpu = 2; memory = "2GiB"; }; };
    };
  };

  deployment-method.tf-incus = { project = "default"; };
}
