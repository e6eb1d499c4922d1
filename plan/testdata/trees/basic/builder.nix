# The test trees' builder: { configuration, plan }: a test bed closure. The hello
# application's `closure` setting picks it; the tag follows the plan (listed modules'
# content included, as toJSON copies them to the store) and the configuration.
{ configuration, plan }:
let
  tag = builtins.substring 0 12
    (builtins.hashString "sha256" (builtins.toJSON plan + builtins.readFile configuration));
  closures = import ../../../../testbed/closures { inherit tag; };
in
closures.${(plan.applications.hello or { }).closure or "healthy"}
