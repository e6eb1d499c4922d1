# switchyard: evaluate an operator tree's deployment.nix to data (SPEC 6.1).
#
#   nix-instantiate --eval --strict --json --argstr tree /abs/tree --expr "$(cat definition.nix)"
#
# A path inside the tree becomes { _repoPath = "<relative path>"; }. A value that is not
# data (a function, a derivation or other store object, a string with store context, a
# path outside the tree) becomes a { __switchyard_not_data = "<what>"; } marker, which
# switchyard refuses naming its field path. `nixpkgs` is kept as a path string, never
# traversed or copied into the store.
{ tree }:
let
  root = /. + tree;
  rootString = toString root;
  prefix = rootString + "/";
  prefixLength = builtins.stringLength prefix;
  notData = what: { __switchyard_not_data = what; };

  toData = v:
    if builtins.isFunction v then notData "a function"
    else if builtins.isPath v then pathData (toString v)
    else if builtins.isAttrs v then
      if (v.type or null) == "derivation" then notData "a derivation"
      else if v ? outPath then notData "a store object (it has an outPath)"
      else builtins.mapAttrs (_: toData) v
    else if builtins.isList v then map toData v
    else if builtins.isString v && builtins.hasContext v then notData "a string with store context"
    else v;

  pathData = s:
    if s == rootString then notData "the tree itself, not a file in it"
    else if builtins.substring 0 prefixLength s == prefix then { _repoPath = builtins.substring prefixLength (-1) s; }
    else notData "a path outside the tree (${s})";

  nixpkgsRef = v:
    if v == null then null
    else if builtins.isPath v then toString v
    else if builtins.isString v then builtins.unsafeDiscardStringContext v
    else if builtins.isAttrs v && v ? outPath then builtins.unsafeDiscardStringContext (toString v)
    else notData "not a path to nixpkgs";

  deployment = import (root + "/deployment.nix");
in
if builtins.isAttrs deployment && !(deployment ? outPath) then
  builtins.mapAttrs (name: v: if name == "nixpkgs" then nixpkgsRef v else toData v) deployment
else
  toData deployment
