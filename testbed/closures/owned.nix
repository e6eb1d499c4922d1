# Test closures: closures for which units a configuration owns (fstab mounts and swaps, oneshot chains, an unreadable unit directory).
# Imported by default.nix; `toplevel`, `service`, `payload` and `hello` are its builders.
{ toplevel, service, payload, hello }:
let
  # A copy of the toplevel `base` with `script` run in it: for shapes the toplevel
  # builder cannot make (a symlink loop, no unit directory at all).
  reshape = base: script: derivation {
    inherit (base) name system;
    builder = "/bin/sh";
    args = [ "-c" ''
      set -e
      /bin/cp -a ${base} $out
      /bin/chmod -R u+w $out
      cd $out
      ${script}
    '' ];
  };

  broken = service {
    description = "switchyard test: fails on purpose";
    exec = "${payload}/bin/fail";
    service = "Type=oneshot";
  };

  failedUnit = toplevel {
    name = "owned-unreadable";
    units."hello.service" = hello;
    units."broken.service" = broken;
    wants."multi-user.target" = [ "hello.service" "broken.service" ];
  };
in
{
  # An owned unit fails, and the unit directory holds a symlink that points at itself,
  # so `find -L` over it fails (Too many levels of symbolic links): the owned units
  # cannot be listed, which must never read as "the configuration owns nothing".
  owned-unreadable = reshape failedUnit ''
    /bin/ln -s loop.service etc/systemd/system/loop.service
  '';

  # A configuration without etc/systemd/system: it owns no units, which is fine.
  owned-no-unit-dir = reshape (toplevel { name = "owned-no-unit-dir"; }) ''
    /bin/rm -r etc/systemd
  '';

  # fileSystems as NixOS writes them into etc/fstab: a healthy tmpfs mount next to a
  # data mount of a file system type no kernel has, which fails at once.
  fstab-mounts = toplevel {
    name = "fstab-mounts";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/fstab" = ''
      # This is a generated file (switchyard test closure, shaped like NixOS's).
      tmpfs /mnt/scratch tmpfs mode=0755,size=1m 0 0
      data-src /mnt/data nosuchfs defaults 0 0
    '';
  };

  # A chain whose head is a plain oneshot (no RemainAfterExit=, NixOS's default): it
  # runs, succeeds, and ends inactive; the tail is a service that stays up.
  chain-oneshot = toplevel {
    name = "chain-oneshot";
    units."prepare-secrets.service" = service {
      description = "switchyard test: a oneshot chain head";
      exec = "${payload}/bin/switchyard-hello";
      service = "Type=oneshot";
    };
    units."hello.service" = service {
      description = "switchyard test: a healthy service after the chain head";
      exec = "${payload}/bin/serve";
      extra = ''
        After=prepare-secrets.service
        Wants=prepare-secrets.service
      '';
    };
    wants."multi-user.target" = [ "hello.service" "prepare-secrets.service" ];
    files."etc/switchyard/chain" = "prepare-secrets.service\nhello.service\n";
  };
}
