let
  leaf = derivation { name = "sy-golden-leaf"; system = builtins.currentSystem; builder = "/bin/sh"; args = ["-c" "echo hi > $out"]; };
in derivation { name = "sy-golden-top"; system = builtins.currentSystem; builder = "/bin/sh"; args = ["-c" "/bin/mkdir $out; echo ${leaf} > $out/ref; /bin/ln -s ${leaf} $out/link"]; }
