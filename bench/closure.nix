# The benchmark's closure: `n` small store paths and one of `bigMiB` MiB, all
# referenced from one root, built without nixpkgs (/bin/sh builders).
{ n ? 1000, bigMiB ? 32, tag ? "" }:
let
  sh = name: script: derivation {
    inherit name;
    system = builtins.currentSystem;
    builder = "/bin/sh";
    args = [ "-c" script ];
  };
  small = i: sh "bench-small-${toString i}${tag}" "echo 'small path ${toString i}' > $out";
  big = sh "bench-big${tag}" "/usr/bin/head -c ${toString (bigMiB * 1024 * 1024)} /dev/urandom > $out";
in
sh "bench-root${tag}" ''
  /bin/mkdir $out
  echo ${big} > $out/big
  ${builtins.concatStringsSep "\n" (builtins.genList (i: "echo ${small i} >> $out/refs") n)}
''
