# switchyard's NixOS module (the flake's nixosModules.default, with guest-api.nix):
#
#   switchyard.plan   the node's plan (plan.json, tree paths restored); set by the
#                     generated configuration.nix, read by the operator's modules
#   switchyard.chain  the units that bring the node's secrets up, in order; written one per
#                     line to /etc/switchyard/chain, which the deploy's chain gate reads
#                     (SPEC 4.4)
{ config, lib, ... }:
{
  # One key however it is imported (by path from configuration.nix, or as a flake
  # output), so importing it twice is harmless.
  key = "switchyard/nix/module.nix";

  options.switchyard = {
    plan = lib.mkOption {
      type = lib.types.attrs;
      default = { };
      description = ''
        The node's switchyard plan: node, group, method, domain, email, applications
        (enabled ones: name to settings), modules, coordinates and the node's transport
        settings, with files of the operator tree as paths. Set by the configuration
        switchyard generates; do not set it by hand.
      '';
    };
    chain = lib.mkOption {
      type = lib.types.listOf lib.types.str;
      default = [ ];
      example = [ "secret-agent.service" "secrets-ready.service" ];
      description = ''
        Units that bring the node's secrets up, in order. The deploy's verdict-only pass
        waits until every one is done before it restarts failed units. A member is done
        when it is active, or when it is a `Type=oneshot` service without
        `RemainAfterExit=` (NixOS's default for oneshots), which ends inactive after it
        succeeded, and its main process ran and exited successfully since the running
        generation was activated. A oneshot that last ran before the activation, or whose
        start a `Condition*=` skipped, is not done. The gate stops early when the first
        member not yet done has failed, or when no member changed for
        `DEPLOY_CHAIN_STALL` seconds.
      '';
    };
  };

  config = lib.mkIf (config.switchyard.chain != [ ]) {
    environment.etc."switchyard/chain".text = lib.concatMapStrings (unit: unit + "\n") config.switchyard.chain;
  };
}
