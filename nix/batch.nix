# switchyard: several nodes' toplevel derivations in one evaluation (issue 14): build.nix
# applied to each node directory, in the order given. One Nix process parses
# switchyard's library, the tree's builder and nixpkgs once for a batch of nodes,
# instead of one process per node.
#
# The result is a list of .drv paths, one per node, printed with nix-instantiate --eval
# --strict --json --read-write-mode (which writes the derivations to the store, as
# nix-instantiate without --eval does): a list of the derivations themselves would not
# do, since nix-instantiate prints a derivation value once however many nodes share
# it. Its text goes to nix-instantiate --expr as it is; every input is an --argstr
# (plan.BatchEvalArgv):
#
#   build     the state dir's nix/build.nix, absolute
#   nodeDirs  the nodes' directories, absolute, one per line
#   tree, system, nixpkgs  as for build.nix, the same for every node
{ build, tree, nodeDirs, system ? "nixos", nixpkgs ? "" }:
map
  (nodeDir: (import (/. + build) { inherit tree nodeDir system nixpkgs; }).toplevel.drvPath)
  (builtins.filter (d: builtins.isString d && d != "") (builtins.split "\n" nodeDirs))
