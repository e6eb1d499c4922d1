{
  description = "switchyard: deploy NixOS configurations to fleets of nodes and judge, per node, whether it really came up";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.05";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f system nixpkgs.legacyPackages.${system});
      version = "0.1.0";
      methods = [ "ssh" "tf" "tf-incus" "tf-incus-operator" ];
    in
    {
      packages = forAllSystems (system: pkgs: {
        default = pkgs.buildGoModule {
          pname = "switchyard";
          inherit version;
          src = ./.;
          # No third-party modules yet; set to the module hash once go.sum lists some.
          vendorHash = null;
          subPackages = [ "cmd/switchyard" ];
          ldflags = [ "-s" "-w" "-X github.com/switchyard-nix/switchyard/cmd/switchyard/cli.Version=${version}" ];
          # Test-bed tests need Incus and skip outside it; the unit tier runs here.
          nativeCheckInputs = [ pkgs.nix ];
          meta.mainProgram = "switchyard";
        };
      });

      # nix run .#<method> -- <verb>  ==  switchyard <method> <verb>
      apps = forAllSystems (system: pkgs:
        let
          sw = self.packages.${system}.default;
          app = method: {
            type = "app";
            # The OpenTofu methods run nixpkgs' opentofu unless SWITCHYARD_TOFU names another.
            program = toString (pkgs.writeShellScript "switchyard-${method}" ''
              ${nixpkgs.lib.optionalString (method != "ssh") ''export SWITCHYARD_TOFU="''${SWITCHYARD_TOFU:-${pkgs.opentofu}/bin/tofu}"''}
              exec ${sw}/bin/switchyard ${method} "$@"
            '');
          };
        in
        nixpkgs.lib.genAttrs methods app // {
          default = { type = "app"; program = "${sw}/bin/switchyard"; };
        });

      devShells = forAllSystems (system: pkgs: {
        default = pkgs.mkShell {
          packages = [ pkgs.go pkgs.gopls pkgs.opentofu pkgs.incus pkgs.nix pkgs.openssh ];
        };
      });

      # switchyard's Nix library (SPEC 6.3, 8): the plan reader, readPlan tree planFile,
      # which maps every { "_repoPath": ... } of a plan.json back to a path in the tree.
      lib = import ./nix/lib.nix;

      # switchyard.plan and switchyard.chain (module.nix), and the Incus guest-API module
      # (guest-api.nix, off unless switchyard.guestApi.enable; the configuration switchyard
      # generates for an incus node enables it). Each has a fixed `key`, so importing it
      # here and through a generated configuration.nix is harmless.
      nixosModules = {
        default = { imports = [ ./nix/module.nix ./nix/guest-api.nix ]; };
        switchyard = ./nix/module.nix;
        guestApi = ./nix/guest-api.nix;
      };

      checks = forAllSystems (system: pkgs: {
        # buildGoModule runs `go test ./...` in its check phase.
        switchyard = self.packages.${system}.default;
      });
    };
}
