# A closure of many small store paths and one large one, for the copy tests, built
# with the real nix-build and without nixpkgs (builder /bin/sh, absolute tools):
#
#   nix-build transports/nixserve/testdata/closure.nix --argstr tag t1 --arg n 200
#
# `n` leaves, each a directory with a file, an executable file and a symlink; leaf i
# references leaf i-1 except every tenth, so chains make the dependency order
# matter. One path of about `bigMiB` MiB is a single regular file that references
# every leaf (so it comes after all of them), and the root references every leaf
# and the big path. `tag` makes distinct store paths.
{ system ? builtins.currentSystem, tag ? "", n ? 200, bigMiB ? 5 }:
let
  suffix = if tag == "" then "" else "-" + tag;
  sh = name: script: env: derivation ({
    inherit name system;
    builder = "/bin/sh";
    args = [ "-c" script ];
  } // env);

  leaf = i: sh "sy-copy-leaf-${toString i}${suffix}" ''
    set -e
    /bin/mkdir -p $out/bin
    echo "leaf ${toString i} ${tag}" > $out/data
    printf '#!/bin/sh\necho leaf ${toString i}\n' > $out/bin/hello
    /bin/chmod +x $out/bin/hello
    /bin/ln -s data $out/link
    echo "$prev" > $out/prev
  '' {
    prev = if i == 0 || i - (i / 10) * 10 == 0 then "" else builtins.elemAt leaves (i - 1);
  };
  leaves = builtins.genList leaf n;

  big = sh "sy-copy-big${suffix}" ''
    { echo $deps; /usr/bin/yes "switchyard copy test ${tag}" | /usr/bin/head -c ${toString (bigMiB * 1048576)}; } > $out
  '' { deps = leaves; };
in
sh "sy-copy-root${suffix}" ''
  set -e
  /bin/mkdir $out
  for d in $deps; do echo "$d"; done > $out/deps
'' { deps = leaves ++ [ big ]; }
