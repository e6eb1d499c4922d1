# switchyard's Nix library (the flake's `lib`): the plan reader of SPEC 6.3.
#
#   (import ./lib.nix).readPlan ./. ./.switchyard/nodes/web1/plan.json
#
# plan.json writes a file of the operator tree as { "_repoPath": "<relative path>" };
# readPlan maps every such object back to a path in `tree` (a path, or a string such as
# a flake's outPath), at any depth. Nothing else in the plan changes.
let
  isRepoPath = v: builtins.isAttrs v && builtins.attrNames v == [ "_repoPath" ] && builtins.isString v._repoPath;

  # The same rule as switchyard's: relative, never "..", never absolute, never the tree.
  checkRelative = rel:
    if rel == "" || builtins.substring 0 1 rel == "/"
      || builtins.match "(.*/)?\\.\\.(/.*)?" rel != null
      || builtins.match "\\.?/*" rel != null
    then throw "switchyard: _repoPath ${builtins.toJSON rel} is not a path inside the tree"
    else rel;

  # The path of a tree file.
  treePath = tree: rel:
    if builtins.isPath tree then tree + "/${checkRelative rel}"
    else "${toString tree}/${checkRelative rel}";

  # Map every _repoPath in a value back to its tree path.
  restorePaths = tree: v:
    if isRepoPath v then treePath tree v._repoPath
    else if builtins.isAttrs v then builtins.mapAttrs (_: restorePaths tree) v
    else if builtins.isList v then map (restorePaths tree) v
    else v;

  # Read a plan.json, tree paths restored.
  readPlan = tree: planFile: restorePaths tree (builtins.fromJSON (builtins.readFile planFile));
in
{
  inherit readPlan restorePaths treePath isRepoPath;
}
