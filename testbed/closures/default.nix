# Test closures for switchyard's test bed: store paths shaped like a NixOS system
# toplevel (bin/switch-to-configuration, etc/systemd/system, sw/bin), built with the
# real nix-build but without nixpkgs: every builder is /bin/sh with absolute tools.
#
#   nix-build testbed/closures -A healthy --argstr tag run42
#
# `tag` makes a distinct toplevel (a "new generation") without changing behaviour.
{ system ? builtins.currentSystem, tag ? "" }:
let
  sh = name: script: derivation {
    inherit name system;
    builder = "/bin/sh";
    args = [ "-c" script ];
  };

  # Programs the units run; a separate store path, so a toplevel has real references.
  payload = sh "switchyard-test-payload" ''
    set -e
    /bin/mkdir -p $out/bin
    printf '#!/bin/sh\n# a service that stays up\nwhile :; do /bin/sleep 3600; done\n' > $out/bin/serve
    printf '#!/bin/sh\n# a service that crashes a second after it starts\n/bin/sleep 1\necho crashing >&2\nexit 1\n' > $out/bin/crash
    printf '#!/bin/sh\n# a unit that fails at once\necho "broken on purpose" >&2\nexit 3\n' > $out/bin/fail
    printf '#!/bin/sh\n# a secret agent: delivers the secret after a delay, then stays up\n/bin/sleep "$1"\n/bin/mkdir -p /run/switchyard-test\n: > /run/switchyard-test/secret\nwhile :; do /bin/sleep 3600; done\n' > $out/bin/secret-agent
    printf '#!/bin/sh\necho hello from switchyard\n' > $out/bin/switchyard-hello
    /bin/chmod +x $out/bin/*
  '';

  # A toplevel: `units` are unit files, `wants` maps a target to the units it wants,
  # `files` are extra files under the toplevel (etc/switchyard/chain, .link files, ...).
  # `init = false` leaves out stage 2 (a container's /sbin/init target): the boot
  # entry cannot be installed.
  toplevel = { name, units ? { }, wants ? { }, files ? { }, init ? true }:
    let
      unitNames = builtins.attrNames units;
      targets = builtins.attrNames wants;
      fileNames = builtins.attrNames files;
      indexed = prefix: list: builtins.listToAttrs (builtins.genList
        (i: { name = "${prefix}${toString i}"; value = builtins.elemAt list i; })
        (builtins.length list));
      wantLinks = builtins.concatLists (map (t: map (u: "${t}.wants/${u}") wants.${t}) targets);
    in
    derivation ({
      name = "nixos-system-${name}${if tag == "" then "" else "-" + tag}";
      inherit system;
      builder = "/bin/sh";
      stc = ./switch-to-configuration.sh;
      stage2 = ./init.sh;
      inherit payload;
      args = [ "-c" ''
        set -e
        d=$out/etc/systemd/system
        /bin/mkdir -p $out/bin $out/sw/bin $d
        /bin/cp $stc $out/bin/switch-to-configuration
        /bin/chmod +x $out/bin/switch-to-configuration
        /bin/ln -s $payload/bin/switchyard-hello $out/sw/bin/switchyard-hello
        printf '%s\n' "${name}${tag}" > $out/nixos-version
        # What a boot entry names (the VM tier boots them): stage 2, and the kernel and
        # initrd, which are the Debian node's own (this fixture stands in for NixOS).
        ${if init then ''
        /bin/sed "s|@out@|$out|g" $stage2 > $out/init
        /bin/chmod +x $out/init'' else ": no stage 2"}
        /bin/ln -s /boot/vmlinuz $out/kernel
        /bin/ln -s /boot/initrd.img $out/initrd
        printf '%s' "${kernelParams}" > $out/kernel-params
        i=0
        while eval "n=\''${unitname$i:-}"; [ -n "$n" ]; do
          eval "printf '%s' \"\$unittext$i\"" > $d/$n
          i=$((i+1))
        done
        i=0
        while eval "l=\''${wantlink$i:-}"; [ -n "$l" ]; do
          /bin/mkdir -p $d/$(/usr/bin/dirname $l)
          /bin/ln -s ../$(/usr/bin/basename $l) $d/$l
          i=$((i+1))
        done
        i=0
        while eval "p=\''${filepath$i:-}"; [ -n "$p" ]; do
          /bin/mkdir -p $out/$(/usr/bin/dirname $p)
          eval "printf '%s' \"\$filetext$i\"" > $out/$p
          i=$((i+1))
        done
      '' ];
    }
    // indexed "unitname" unitNames
    // indexed "unittext" (map (n: units.${n}) unitNames)
    // indexed "wantlink" wantLinks
    // indexed "filepath" fileNames
    // indexed "filetext" (map (n: files.${n}) fileNames));

  # The VM tier's disk is one ext4 file system on the virtio disk; the console is serial.
  kernelParams = "root=/dev/vda rw console=ttyS0";

  service = { description, exec, extra ? "", service ? "" }: ''
    [Unit]
    Description=${description}
    ${extra}
    [Service]
    ExecStart=${exec}
    ${service}
  '';

  hello = service {
    description = "switchyard test: a healthy service";
    exec = "${payload}/bin/serve";
  };

  # What the closure files of one area each get: the builders above.
  area = file: import file { inherit toplevel service payload hello; };
in
# Closures of one area live in a file of their own (verdict.nix: unit classes;
# switch.nix: switch-to-configuration's behaviour; owned.nix: which units a
# configuration owns; ng.nix: switch-to-configuration-ng's unit rules), so each
# area's fixtures can be read (and changed) on their own.
area ./verdict.nix // area ./switch.nix // area ./owned.nix // area ./identity.nix
// import ./ng.nix { inherit toplevel service payload hello tag; } // rec {
  inherit payload;

  # Everything comes up.
  healthy = toplevel {
    name = "healthy";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
  };

  # An owned, wanted unit fails: switch-to-configuration exits 4.
  failed-unit = toplevel {
    name = "failed-unit";
    units."hello.service" = hello;
    units."broken.service" = service {
      description = "switchyard test: fails on purpose";
      exec = "${payload}/bin/fail";
      service = "Type=oneshot";
    };
    wants."multi-user.target" = [ "hello.service" "broken.service" ];
  };

  # A service that restarts forever, with its own loop budget.
  restart-loop = toplevel {
    name = "restart-loop";
    units."hello.service" = hello;
    units."flappy.service" = service {
      description = "switchyard test: crashes and is restarted forever";
      exec = "${payload}/bin/crash";
      extra = "StartLimitIntervalSec=0";
      service = ''
        Restart=always
        RestartSec=1
        Environment=DEPLOY_LOOP_BUDGET=30
      '';
    };
    wants."multi-user.target" = [ "hello.service" "flappy.service" ];
  };

  # A wanted unit whose Condition is never met: systemd skips it.
  condition-skipped = toplevel {
    name = "condition-skipped";
    units."hello.service" = hello;
    units."only-on-metal.service" = service {
      description = "switchyard test: skipped by its condition";
      exec = "${payload}/bin/serve";
      extra = "ConditionPathExists=/etc/switchyard-test/this-is-bare-metal";
    };
    wants."multi-user.target" = [ "hello.service" "only-on-metal.service" ];
  };

  # switch-to-configuration exits 0 but never repoints /run/current-system.
  never-activates = toplevel {
    name = "never-activates";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/switchyard-test/never-activate" = "";
  };

  # Like never-activates, but the switch installs the boot entry before it does not
  # activate (NixOS's order): the node would boot the never-activated generation unless
  # the boot entry is reverted.
  never-activates-after-boot-entry = toplevel {
    name = "never-activates-after-boot-entry";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/switchyard-test/never-activate" = "";
    files."etc/switchyard-test/bootloader-first" = "";
  };

  # Healthy, and the activation restarts sshd and the network under the deploy's own
  # SSH connection (NixOS restarts them when their configuration changed).
  restarts-ssh-and-network = toplevel {
    name = "restarts-ssh-and-network";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/switchyard-test/restart-units" = "ssh.service\nsystemd-networkd.service\n";
  };

  # Healthy, but installing the boot entry takes 3 s (in the switch and in finalize's
  # `switch-to-configuration boot`): time to kill the deployer during finalize.
  slow-bootloader = toplevel {
    name = "slow-bootloader";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/switchyard-test/bootloader-delay" = "3";
  };

  # Healthy, but the switch takes 15 s: time to cut the connection under it.
  slow-switch = toplevel {
    name = "slow-switch";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/switchyard-test/switch-delay" = "15";
  };

  # A secret chain: the agent delivers a secret after `delay` seconds; secrets-ready
  # starts when it appears (a path unit). With headFails the agent fails at once.
  chain = { delay ? 4, headFails ? false }: toplevel {
    name = "chain";
    units."hello.service" = hello;
    units."secret-agent.service" = service {
      description = "switchyard test: secret agent (chain head)";
      exec = if headFails then "${payload}/bin/fail" else "${payload}/bin/secret-agent ${toString delay}";
      # A failing head is a oneshot, so its start job waits for the failure: a simple
      # service that exits right after its start raced the switch's failed-unit check.
      service = if headFails then "Type=oneshot" else "";
    };
    units."secrets-ready.path" = ''
      [Unit]
      Description=switchyard test: waits for the delivered secret
      [Path]
      PathExists=/run/switchyard-test/secret
    '';
    units."secrets-ready.service" = service {
      description = "switchyard test: secrets are in place (chain tail)";
      exec = "/bin/true";
      service = ''
        Type=oneshot
        RemainAfterExit=yes
      '';
    };
    wants."multi-user.target" = [ "hello.service" "secret-agent.service" "secrets-ready.path" ];
    files."etc/switchyard/chain" = "secret-agent.service\nsecrets-ready.service\n";
  };
  secret-chain = chain { };
  # The head fails at once.
  secret-chain-broken = chain { headFails = true; };
  # The secret never arrives: the chain stalls at its tail.
  secret-chain-stalled = chain { delay = 100000; };

  # Units systemd cannot spawn for host reasons (an unprivileged container on a
  # machine with one NUMA node): 242 (NUMA policy) and 214 (scheduler policy).
  spawn-fault = toplevel {
    name = "spawn-fault";
    units."hello.service" = hello;
    units."numa-pinned.service" = service {
      description = "switchyard test: binds memory to NUMA node 5";
      exec = "${payload}/bin/serve";
      service = ''
        NUMAPolicy=bind
        NUMAMask=5
      '';
    };
    units."realtime.service" = service {
      description = "switchyard test: asks for a realtime scheduler";
      exec = "${payload}/bin/serve";
      service = ''
        CPUSchedulingPolicy=fifo
        CPUSchedulingPriority=50
      '';
    };
    wants."multi-user.target" = [ "hello.service" "numa-pinned.service" "realtime.service" ];
  };

  # A .link file matching a permanent MAC address no test node has.
  foreign-mac = toplevel {
    name = "foreign-mac";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/systemd/network/10-uplink.link" = ''
      [Match]
      PermanentMACAddress=02:5e:1f:de:ad:01

      [Link]
      Name=uplink0
    '';
  };
}
