# switchyard: several nodes' toplevel derivations in one evaluation (issue 14): build.nix
# applied to each node directory, in the order given. One Nix process parses
# switchyard's library, the tree's builder and nixpkgs once for the nodes of a run,
# instead of one process per node. nix-instantiate prints one .drv per node, in order
# (a toplevel two nodes share, twice). Its text goes to nix-instantiate --expr as it is;
# every input is an --argstr (plan.BatchEvalArgv):
#
#   build     the state dir's nix/build.nix, absolute
#   nodeDirs  the nodes' directories, absolute, one per line
#   tree, system, nixpkgs  as for build.nix, the same for every node
{ build, tree, nodeDirs, system ? "nixos", nixpkgs ? "" }:
map
  (nodeDir: (import (/. + build) { inherit tree nodeDir system nixpkgs; }).toplevel)
  (builtins.filter (d: builtins.isString d && d != "") (builtins.split "\n" nodeDirs))
