# SPEC 8 and 9.3: a unit in a restart loop on a real NixOS target. The deploy reports the
# loop with the unit's own budget (DEPLOY_LOOP_BUDGET=30 in its Environment=) and passes;
# once the loop has lasted past that budget, the verdict-only pass fails naming the unit
# and its budget.
{ self, pkgs }:
let
  inherit (pkgs) lib;
  common = import ./common.nix { inherit self pkgs; };

  systems = nodes: common.targetSystems nodes.target {
    restart-loop = { pkgs, ... }: {
      imports = [ common.hello ];
      systemd.services.flappy = {
        description = "switchyard test: crashes and is restarted forever";
        wantedBy = [ "multi-user.target" ];
        # No start limit: it loops forever instead of ending up failed.
        startLimitIntervalSec = 0;
        environment.DEPLOY_LOOP_BUDGET = "30";
        serviceConfig = {
          ExecStart = pkgs.writeShellScript "crash" "sleep 1; echo crashing >&2; exit 1";
          Restart = "always";
          RestartSec = 1;
        };
      };
    };
  };
in
common.singleTarget {
  name = "deployment-verdict-loop";
  inherit systems;
  script = s: ''
      with subtest("restart-loop"):
          # Reported with its restart count and budget; the deploy does not fail for it.
          v = verdict(switchyard(f"{DEPLOY} --toplevel ${s.restart-loop}", 0), "target")
          loops = v["units"]["restart_loops"]
          assert [lp["unit"] for lp in loops] == ["flappy.service"], loops
          assert loops[0]["budget_s"] == 30 and loops[0]["over_budget"] is False, loops
          assert v["ok"] and names(v, "failed") == [], v
          target.succeed("systemctl show -P Environment flappy.service | grep -q DEPLOY_LOOP_BUDGET=30")

      with subtest("restart-loop-over-budget"):
          # Past the unit's 30 s budget, still looping: the verdict-only pass fails,
          # naming the unit and its budget; it switches nothing.
          target.sleep(35)
          v = verdict(switchyard(DEPLOY, 1, "DEPLOY_VERDICT_ONLY=1"), "target")
          assert v["pass"] == "verdict-only" and v["switch"]["result"] == "skipped", v
          assert "flappy.service" in reasons(v) and "budget 30s" in reasons(v), v
          assert [lp["over_budget"] for lp in v["units"]["restart_loops"]] == [True], v["units"]
          assert running(target) == "${s.restart-loop}"
  '';
}
