# The tree's builder (`system = "builder.nix"`): { configuration, plan }: <toplevel>.
#
# `configuration` is the configuration.nix switchyard generated for the node and `plan`
# its plan.json with tree paths restored. A real builder would evaluate `configuration`
# with NixOS; this one builds without nixpkgs: the test bed's closures stand in for
# NixOS, the hello application's `closure` setting picks one, and a tag derived from the
# plan (every listed module's content, as toJSON copies it to the store) and the
# configuration makes each change a new toplevel.
{ configuration, plan }:
let
  tag = builtins.substring 0 12
    (builtins.hashString "sha256" (builtins.toJSON plan + builtins.readFile configuration));
  closures = import ../../testbed/closures { inherit tag; };
  pick = (plan.applications.hello or { }).closure or "healthy";
in
closures.${pick}
