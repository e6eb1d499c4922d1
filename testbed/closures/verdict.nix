# Test closures: closures whose units show one class of SPEC 4.2 (spawn faults, restart loops, pending units).
# Imported by default.nix; `toplevel`, `service`, `payload` and `hello` are its builders.
{ toplevel, service, payload, hello }:
{
  # Units whose cgroup systemd cannot create: both run in starved.slice, whose cgroup
  # the test creates on the node beforehand with cgroup.max.descendants=0 (the test
  # bed's hybrid hierarchy: /sys/fs/cgroup/unified). systemd then cannot make the
  # units' own cgroups; the forked child cannot join them: 219/CGROUP, of the main
  # process for cgroup-starved.service, of its ExecStartPre= for cgroup-starved-pre.service.
  cgroup-starved = toplevel {
    name = "cgroup-starved";
    units."hello.service" = hello;
    units."cgroup-starved.service" = service {
      description = "switchyard test: its cgroup cannot be created";
      exec = "${payload}/bin/serve";
      service = "Slice=starved.slice";
    };
    units."cgroup-starved-pre.service" = service {
      description = "switchyard test: its cgroup cannot be created (seen by ExecStartPre)";
      exec = "${payload}/bin/serve";
      service = ''
        Slice=starved.slice
        ExecStartPre=/bin/true
      '';
    };
    wants."multi-user.target" = [ "hello.service" "cgroup-starved.service" "cgroup-starved-pre.service" ];
  };

  # A slow restart loop: up 20 s, then a crash, restarted at once, forever. A deploy's
  # watch sees at most one restart of it.
  slow-loop = toplevel {
    name = "slow-loop";
    units."hello.service" = hello;
    units."slow-loop.service" = service {
      description = "switchyard test: crashes after 20 s, restarted forever";
      exec = "/bin/sh -c '/bin/sleep 20; exit 1'";
      extra = "StartLimitIntervalSec=0";
      service = "Restart=always";
    };
    wants."multi-user.target" = [ "hello.service" "slow-loop.service" ];
  };

  # Stable for 70 s after its first start (longer than a stable period, 60 s), then a
  # fast crash loop: a loop that begins long after the activation.
  late-loop = toplevel {
    name = "late-loop";
    units."hello.service" = hello;
    units."late-loop.service" = service {
      description = "switchyard test: stable for 70 s, then crashes every second";
      exec = "/bin/sh -c 'if [ -e /run/late-loop-was-stable ]; then /bin/sleep 1; exit 1; fi; : > /run/late-loop-was-stable; /bin/sleep 70; exit 1'";
      extra = "StartLimitIntervalSec=0";
      service = ''
        Restart=always
        RestartSec=1
        Environment=DEPLOY_LOOP_BUDGET=60
      '';
    };
    wants."multi-user.target" = [ "hello.service" "late-loop.service" ];
  };

  # An owned unit still starting long after the switch: a timer starts a oneshot
  # that takes ten minutes (the switch itself does not wait for it).
  pending-start = toplevel {
    name = "pending-start";
    units."hello.service" = hello;
    units."slow-start.timer" = ''
      [Unit]
      Description=switchyard test: starts slow-start.service a second after the switch
      [Timer]
      OnActiveSec=1s
      AccuracySec=1ms
    '';
    units."slow-start.service" = service {
      description = "switchyard test: takes ten minutes to start";
      exec = "/bin/sleep 600";
      service = "Type=oneshot";
    };
    wants."multi-user.target" = [ "hello.service" "slow-start.timer" ];
  };
}
