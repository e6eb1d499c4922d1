# SPEC 8: verdicts that fail, on a real NixOS target. `switchyard deploy` from the deployer
# to `target`: a healthy system; a unit that fails (SPEC 9.1), strict and tolerated; a
# switch that never activates (9.7); a .link file naming a MAC the VM lacks (9.10); the
# system bus severed while the verdict samples (9.9).
{ self, pkgs }:
let
  inherit (pkgs) lib;
  common = import ./common.nix { inherit self pkgs; };

  systems = nodes: common.targetSystems nodes.target {
    healthy = common.hello;

    # An owned unit, wanted by multi-user.target, that fails at once.
    failed-unit = { pkgs, ... }: {
      imports = [ common.hello ];
      systemd.services.broken = {
        description = "switchyard test: fails on purpose";
        wantedBy = [ "multi-user.target" ];
        serviceConfig = {
          Type = "oneshot";
          ExecStart = pkgs.writeShellScript "broken" "echo 'broken on purpose' >&2; exit 3";
        };
      };
    };

    # Its switch-to-configuration claims success and activates nothing: what a broken
    # wrapper around the real one would do. /run/current-system never moves.
    never-activates = { pkgs, ... }: {
      imports = [ common.hello ];
      system.systemBuilderCommands = ''
        rm -f $out/bin/switch-to-configuration
        printf '#!%s\necho "switch-to-configuration $1: nothing done" >&2\nexit 0\n' \
          ${pkgs.runtimeShell} > $out/bin/switch-to-configuration
        chmod +x $out/bin/switch-to-configuration
      '';
    };

    # A .link file matching a permanent MAC address no NIC of the VM has (QEMU's are
    # 52:54:00:...): udev honours .link files with or without networkd.
    foreign-mac = {
      imports = [ common.hello ];
      systemd.network.links."10-uplink" = {
        matchConfig.PermanentMACAddress = "02:5e:1f:de:ad:01";
        linkConfig.Name = "uplink0";
      };
    };
  };
in
common.singleTarget {
  name = "deployment-verdict-failed";
  inherit systems;
  script = s: ''
      with subtest("healthy"):
          # SPEC 4.5: the configuration comes up: exit 0, switched, profile and boot entry on it.
          top = "${s.healthy}"
          v = verdict(switchyard(f"{DEPLOY} --toplevel {top}", 0), "target")
          assert v["ok"] and v["reachable"] and v["pass"] == "deploy" and v["exit_code"] == 0, v
          assert v["switch"]["result"] == "ok" and v["switch"]["exit_code"] == 0, v["switch"]
          assert v["toplevel"] == top and v["boot_entry"] == top, v
          assert names(v, "failed") == [], v["units"]
          assert running(target) == top and profile(target) == top
          target.succeed("systemctl is-active hello.service")

      with subtest("failed-unit"):
          # SPEC 9.1: the failed unit is named, exit 1, and the node keeps the new
          # generation: system profile and boot entry point at it.
          top = "${s.failed-unit}"
          v = verdict(switchyard(f"{DEPLOY} --toplevel {top}", 1), "target")
          assert names(v, "failed") == ["broken.service"], v["units"]
          assert v["switch"]["result"] == "units-failed" and v["switch"]["exit_code"] == 4, v["switch"]
          assert not v["ok"] and "broken.service" in reasons(v), v
          assert v["boot_entry"] == top and profile(target) == top and running(target) == top, v
          target.succeed("systemctl is-failed broken.service")

      with subtest("failed-unit-tolerated"):
          # SPEC 9.1 with DEPLOY_STRICT_UNITS=0: still named, the node passes.
          v = verdict(switchyard(f"{DEPLOY} --toplevel {top}", 0, "DEPLOY_STRICT_UNITS=0"), "target")
          assert names(v, "failed") == ["broken.service"], v["units"]
          assert v["ok"] and v["strict_units"] is False and v["exit_code"] == 0, v

      with subtest("never-activates"):
          # SPEC 9.7: the switch exits 0 but never activates: never confirmed, exit 1,
          # the boot entry back on the running generation, finalize skipped.
          good = "${s.healthy}"
          switchyard(f"{DEPLOY} --toplevel {good}", 0)
          bad = "${s.never-activates}"
          events = switchyard(f"{DEPLOY} --toplevel {bad}", 1)
          v = verdict(events, "target")
          assert v["switch"]["result"] == "never-confirmed", v["switch"]
          assert v["boot_entry"] == good and not v["ok"], v
          assert running(target) == good and profile(target) == good
          states = phase_states(events, "target", "finalize")
          assert all(st == "skipped" for st in states), states

      with subtest("foreign-mac"):
          # SPEC 9.10: a .link file naming a PermanentMACAddress the node lacks: refused
          # before the copy (exit 2), the file named; nothing reaches or changes the node.
          before = running(target)
          top = "${s.foreign-mac}"
          v = verdict(switchyard(f"{DEPLOY} --toplevel {top}", 2), "target")
          assert "10-uplink.link" in reasons(v), v
          target.fail(f"nix-store --check-validity {top}")
          assert running(target) == before

      with subtest("severed-bus"):
          # SPEC 9.9: the system bus goes away after the settle phase: the lists that
          # could not be read print <not read>, never <none>, and the node exits 3.
          top = "${s.healthy}"
          deployer.succeed(
              "(DEPLOY_SETTLE_ATTEMPTS=5 DEPLOY_CYCLE_INTERVAL=1 DEPLOY_CYCLE_WINDOWS=20"
              f" switchyard {DEPLOY} --toplevel {top} > /tmp/severed.out 2> /tmp/severed.err;"
              " echo $? > /tmp/severed.rc) < /dev/null > /dev/null 2>&1 &"
          )
          deployer.wait_until_succeeds("grep -q 'target: settle done' /tmp/severed.err", timeout=300)
          # dbus.socket first, so nothing starts the bus again; root's systemctl falls
          # back to systemd's private socket: take that away too.
          target.succeed(
              "systemctl stop dbus.socket",
              "systemctl kill --signal=KILL dbus.service",
              "mv /run/systemd/private /run/systemd/private.off",
          )
          deployer.wait_until_succeeds("test -s /tmp/severed.rc", timeout=300)
          target.succeed(
              "mv /run/systemd/private.off /run/systemd/private",
              "systemctl start dbus.socket dbus.service",
          )
          out = deployer.succeed("cat /tmp/severed.out")
          assert deployer.succeed("cat /tmp/severed.rc").strip() == "3", out
          for key in ["system state:", "failed:", "restart loops:", "cycling:", "stale jobs:", "spawn faults:", "set aside:", "skipped:"]:
              line = next((ln for ln in out.splitlines() if key in ln), "")
              assert "<not read>" in line, f"{key} line reads {line!r}"
          assert "<none>" not in out, out
  '';
}
