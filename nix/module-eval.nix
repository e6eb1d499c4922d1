# checks.<system>.module-eval and module-eval-vm: switchyard's NixOS modules evaluated
# and built against the pinned nixpkgs, the way an Incus node uses them:
# nixosModules.default (the plan, the secret chain, the guest API) on top of the nixpkgs
# module that makes the system an Incus instance of its type, `instanceModule` (relative
# to nixos/modules: virtualisation/lxc-container.nix for a container,
# virtualisation/incus-virtual-machine.nix for a virtual machine; plan.InstanceModule),
# as the configuration switchyard generates for an incus node imports it. A module option
# that no longer exists, a type error or a bad unit definition in our modules, or a
# setting of the generated configuration that one of the two instance types lacks, fails
# this check, not an operator's first deploy.
{ nixpkgs, system, self, instanceModule }:
(nixpkgs.lib.nixosSystem {
  inherit system;
  modules = [
    self.nixosModules.default
    (nixpkgs + "/nixos/modules/" + instanceModule)
    ({ lib, pkgs, ... }: {
      system.stateVersion = "26.05";
      networking.hostName = "web1";

      # What a generated configuration.nix sets: the plan (through the plan reader) and,
      # for an incus node, the guest API and no nixpkgs channel copy.
      switchyard.plan = self.lib.readPlan ./. ./module-eval-plan.json;
      switchyard.guestApi.enable = true;
      system.installer.channel.enable = lib.mkDefault false;

      # A two-member secret chain: the agent delivers a secret, the app waits for it.
      switchyard.chain = [ "secret-agent.service" "app.service" ];
      systemd.services.secret-agent = {
        wantedBy = [ "multi-user.target" ];
        serviceConfig.ExecStart = "${pkgs.coreutils}/bin/sleep infinity";
      };
      systemd.services.app = {
        wantedBy = [ "multi-user.target" ];
        after = [ "secret-agent.service" "switchyard-guest-api.service" ];
        requires = [ "secret-agent.service" ];
        serviceConfig.ExecStart = "${pkgs.coreutils}/bin/sleep infinity";
      };
    })
  ];
}).config.system.build.toplevel
