# SPEC 8, 4.1 (#9 owned units, #10 sweep) and 4.2: how switchyard reads the units of a real
# NixOS system: a unit skipped by its Condition*= (not restarted, named; SPEC 9.6), a failed
# unit the configuration does not define (set aside; SPEC 9.5), a unit name with systemd's
# escapes (a mount of /srv/data-set is srv-data\x2dset.mount), and instances of a template
# the configuration defines (worker@broken.service is owned through worker@.service).
{ self, pkgs }:
let
  inherit (pkgs) lib;
  common = import ./common.nix { inherit self pkgs; };

  systems = nodes: common.targetSystems nodes.target {
    healthy = common.hello;

    # Wanted, but its condition never holds in a VM: systemd skips it.
    condition-skipped = { pkgs, ... }: {
      imports = [ common.hello ];
      systemd.services.only-on-metal = {
        description = "switchyard test: skipped by its condition";
        wantedBy = [ "multi-user.target" ];
        unitConfig.ConditionPathExists = "/etc/switchyard-test/this-is-bare-metal";
        serviceConfig.ExecStart = "${pkgs.coreutils}/bin/sleep infinity";
      };
    };

    # A mount whose unit name carries an escape, failing: tmpfs refuses the size.
    escaped-unit-names = {
      imports = [ common.hello ];
      systemd.mounts = [{
        description = "switchyard test: a tmpfs whose size does not parse";
        what = "tmpfs";
        where = "/srv/data-set";
        type = "tmpfs";
        options = "size=nonsense";
        wantedBy = [ "multi-user.target" ];
      }];
    };

    # A template and two instances of it, one of which fails.
    template-instances = { pkgs, ... }: {
      imports = [ common.hello ];
      systemd.services."worker@" = {
        description = "switchyard test: worker %i";
        serviceConfig = {
          Type = "oneshot";
          RemainAfterExit = true;
          ExecStart = "${pkgs.bash}/bin/bash -c 'test %i != broken'";
        };
      };
      systemd.targets.multi-user.wants = [ "worker@alpha.service" "worker@broken.service" ];
    };
  };
in
common.singleTarget {
  name = "deployment-unit-parsers";
  inherit systems;
  script = s: ''
      with subtest("condition-skipped"):
          # Named in the verdict, not restarted by the sweep, and the deploy passes.
          events = switchyard(f"{DEPLOY} --toplevel ${s.condition-skipped}", 0)
          v = verdict(events, "target")
          assert names(v, "condition_skipped") == ["only-on-metal.service"], v["units"]
          assert names(v, "failed") == [], v["units"]
          restarted = [m for m in logs(events, "target") if "restarting" in m and "only-on-metal" in m]
          assert restarted == [], restarted
          assert target.succeed("systemctl show -P ActiveState only-on-metal.service").strip() == "inactive"
          assert target.succeed("systemctl show -P ConditionResult only-on-metal.service").strip() == "no"

      with subtest("set-aside"):
          # A failed unit left over from an older setup, outside the configuration (a
          # runtime unit file): named as set aside, never failing the verdict. Judged by
          # a verdict-only pass of the generation the node runs: a switch would not show
          # it, since switch-to-configuration-ng resets every failed unit (ResetFailed)
          # after the activation, before its daemon-reload.
          switchyard(f"{DEPLOY} --toplevel ${s.healthy}", 0)
          target.succeed(
              "printf '[Unit]\\nDescription=left over from an older setup\\n[Service]\\nType=oneshot\\nExecStart=/run/current-system/sw/bin/false\\n'"
              " > /run/systemd/system/old-cron.service",
              "systemctl daemon-reload",
              "systemctl start old-cron.service || true",
              "systemctl is-failed old-cron.service",
          )
          v = verdict(switchyard(DEPLOY, 0, "DEPLOY_VERDICT_ONLY=1"), "target")
          assert v["pass"] == "verdict-only", v
          assert names(v, "set_aside") == ["old-cron.service"], v["units"]
          assert names(v, "failed") == [], v["units"]
          target.succeed(
              "rm /run/systemd/system/old-cron.service",
              "systemctl daemon-reload",
              "systemctl reset-failed",
          )

      with subtest("escaped-unit-names"):
          # The name as systemd spells it, escape and all: owned (the closure has the
          # unit file under that name), so a failure, not set aside.
          top = "${s.escaped-unit-names}"
          deployer.succeed(f"test -e '{top}/etc/systemd/system/srv-data\\x2dset.mount'")
          v = verdict(switchyard(f"{DEPLOY} --toplevel {top}", 1), "target")
          assert names(v, "failed") == ["srv-data\\x2dset.mount"], v["units"]
          assert names(v, "set_aside") == [], v["units"]
          target.succeed("systemctl is-failed 'srv-data\\x2dset.mount'")

      with subtest("template-instances"):
          # Instances are owned through their template: the failed one fails the deploy,
          # the other runs.
          v = verdict(switchyard(f"{DEPLOY} --toplevel ${s.template-instances}", 1), "target")
          assert names(v, "failed") == ["worker@broken.service"], v["units"]
          assert names(v, "set_aside") == [], v["units"]
          target.succeed("systemctl is-active worker@alpha.service")
          target.succeed("systemctl is-failed worker@broken.service")
  '';
}
