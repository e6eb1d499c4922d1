# SPEC 8 and 9.4: the secret chain gate on a real NixOS target. The chain is declared with
# the `switchyard.chain` option of the flake's NixOS module (SPEC 4.4), which writes
# /etc/switchyard/chain: a secret agent that delivers /run/switchyard-test/secret after
# `delay` seconds (the head), and secrets-ready, a oneshot a path unit starts when the
# secret appears (the tail). The verdict-only pass waits for a converging chain and sweeps
# only after it; a failed head, or a chain without change for DEPLOY_CHAIN_STALL seconds,
# stops the gate early, naming the member.
{ self, pkgs }:
let
  inherit (pkgs) lib;
  common = import ./common.nix { inherit self pkgs; };

  chain = { delay ? 4, headFails ? false }: { pkgs, ... }: {
    imports = [ self.nixosModules.switchyard common.hello ];
    switchyard.chain = [ "secret-agent.service" "secrets-ready.service" ];
    systemd.services.secret-agent = {
      description = "switchyard test: secret agent (chain head)";
      wantedBy = [ "multi-user.target" ];
      serviceConfig =
        if headFails then {
          # A oneshot, so its start job (and the switch) waits for the failure.
          Type = "oneshot";
          ExecStart = "${pkgs.coreutils}/bin/false";
        } else {
          ExecStart = pkgs.writeShellScript "secret-agent" ''
            sleep ${toString delay}
            mkdir -p /run/switchyard-test
            touch /run/switchyard-test/secret
            exec sleep infinity
          '';
        };
    };
    systemd.paths.secrets-ready = {
      description = "switchyard test: waits for the delivered secret";
      wantedBy = [ "multi-user.target" ];
      pathConfig.PathExists = "/run/switchyard-test/secret";
    };
    systemd.services.secrets-ready = {
      description = "switchyard test: secrets are in place (chain tail)";
      serviceConfig = {
        Type = "oneshot";
        RemainAfterExit = true;
        ExecStart = "${pkgs.coreutils}/bin/true";
      };
    };
  };

  systems = nodes: common.targetSystems nodes.target {
    secret-chain = chain { };
    # The head fails at once.
    secret-chain-broken = chain { headFails = true; };
    # The secret never arrives: the chain stalls at its tail.
    secret-chain-stalled = chain { delay = 100000; };
  };
in
common.singleTarget {
  name = "deployment-verdict-chain";
  inherit systems;
  script = s: ''
      import time

      def reset_chain():
          # Each variant starts from a chain that is down: no secret, nothing running.
          target.succeed(
              "systemctl stop secrets-ready.service secret-agent.service",
              "rm -rf /run/switchyard-test",
              "systemctl reset-failed",
          )


      with subtest("secret-chain"):
          top = "${s.secret-chain}"
          switchyard(f"{DEPLOY} --toplevel {top}", 0)
          chain = target.succeed(f"cat {top}/etc/switchyard/chain").split()
          assert chain == ["secret-agent.service", "secrets-ready.service"], chain
          target.wait_until_succeeds("systemctl is-active secrets-ready.service", timeout=60)
          # Take the chain down: the agent delivers the secret again 4 s after its restart.
          target.succeed(
              "rm -f /run/switchyard-test/secret",
              "systemctl stop secrets-ready.service",
              "systemctl restart secret-agent.service",
          )
          events = switchyard(DEPLOY, 0, "DEPLOY_VERDICT_ONLY=1")
          chain_done = [i for i, e in enumerate(events) if e["kind"] == "phase" and e["phase"] == "chain" and e["state"] == "done"]
          sweep_start = [i for i, e in enumerate(events) if e["kind"] == "phase" and e["phase"] == "sweep" and e["state"] == "start"]
          assert chain_done and sweep_start and sweep_start[0] > chain_done[0], "the sweep must follow the chain"
          assert events[chain_done[0]]["elapsed_ms"] >= 2000, events[chain_done[0]]
          target.succeed("systemctl is-active secrets-ready.service")

      with subtest("secret-chain-broken"):
          reset_chain()
          v = verdict(switchyard(f"{DEPLOY} --toplevel ${s.secret-chain-broken}", 1), "target")
          assert names(v, "failed") == ["secret-agent.service"], v["units"]
          start = time.monotonic()
          v = verdict(switchyard(DEPLOY, 1, "DEPLOY_VERDICT_ONLY=1 DEPLOY_CHAIN_TIMEOUT=120"), "target")
          assert time.monotonic() - start < 60, "the gate did not stop early"
          assert "chain member secret-agent.service failed" in reasons(v), v

      with subtest("secret-chain-stalled"):
          reset_chain()
          switchyard(f"{DEPLOY} --toplevel ${s.secret-chain-stalled}", 0)
          events = switchyard(DEPLOY, 1, "DEPLOY_VERDICT_ONLY=1 DEPLOY_CHAIN_STALL=3 DEPLOY_CHAIN_TIMEOUT=120")
          v = verdict(events, "target")
          assert "chain stalled at secrets-ready.service" in reasons(v), v
          states = phase_states(events, "target", "sweep")
          assert all(st == "skipped" for st in states), f"the sweep ran although the chain is down: {states}"
  '';
}
