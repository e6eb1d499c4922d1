# checks.<system>.module-eval: switchyard's NixOS modules evaluated and built against the
# pinned nixpkgs, the way an Incus container node uses them: nixosModules.default (the
# plan, the secret chain, the guest API) on top of nixpkgs' LXC container module, which
# the configuration switchyard generates for an incus container node imports too. A
# module option that no longer exists, a type error or a bad unit definition in our
# modules fails this check, not an operator's first deploy.
{ nixpkgs, system, self }:
(nixpkgs.lib.nixosSystem {
  inherit system;
  modules = [
    self.nixosModules.default
    (nixpkgs + "/nixos/modules/virtualisation/lxc-container.nix")
    ({ pkgs, ... }: {
      system.stateVersion = "26.05";
      networking.hostName = "web1";

      # What a generated configuration.nix sets: the plan (through the plan reader) and,
      # for an incus node, the guest API.
      switchyard.plan = self.lib.readPlan ./. ./module-eval-plan.json;
      switchyard.guestApi.enable = true;

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
