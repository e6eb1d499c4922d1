{
  description = "switchyard: deploy NixOS configurations to fleets of nodes and judge, per node, whether it really came up";

  # nixos-26.05: its Go is 1.26, which go.mod and several dependencies (x/crypto, x/net,
  # x/sys, x/text, x/mod, hc-install) require. flake.lock holds the revision; refresh it
  # with `nix flake lock --update-input nixpkgs` on a machine with network (README).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f system nixpkgs.legacyPackages.${system});
      version = "0.1.0";
      methods = [ "ssh" "tf" "tf-incus" "tf-incus-operator" ];
    in
    {
      packages = forAllSystems (system: pkgs: {
        # buildGo126Module, not buildGoModule: go.mod needs Go 1.26 (buildGoModule builds
        # with GOTOOLCHAIN=local), and a branch's default Go may move, which would change
        # what `go mod vendor` writes and so the vendor hash.
        default = pkgs.buildGo126Module {
          pname = "switchyard";
          inherit version;
          # What the build and its check phase read (nix/src.nix), so that editing the
          # flake, its lock or CI does not rebuild the package.
          src = nixpkgs.lib.fileset.toSource {
            root = ./.;
            fileset = nixpkgs.lib.fileset.unions (map (name: ./. + "/${name}") (import ./nix/src.nix));
          };
          # The NAR SHA-256 of `go mod vendor` of this tree. nixos-tests/vendorhash_test.go
          # recomputes it in the test command and fails when go.mod, go.sum or the
          # imported packages change without it.
          vendorHash = "sha256-wk7Y1+dU/uGCXgCXfpQWbXrNto4LGGETbnxUw8+3K7A=";
          subPackages = [ "cmd/switchyard" ];
          ldflags = [ "-s" "-w" "-X github.com/switchyard-nix/switchyard/cmd/switchyard/cli.Version=${version}" ];
          # buildGoModule tests only `subPackages` when they are set; this runs the unit
          # tier of every package instead: `go test ./...`. The sandbox has no Incus, no
          # test closures, no Nix store to write and no network, so every test-bed test
          # skips (SWITCHYARD_TESTBED is unset), as do the tests that need Nix's tools
          # (none are among the check inputs); the NixOS VM tests are checks of their own.
          # As buildGoModule's own check phase: without -trimpath, since tests find the
          # repository's files from their own source paths.
          checkPhase = ''
            runHook preCheck
            export HOME=$TMPDIR GOFLAGS="''${GOFLAGS//-trimpath/}"
            go test -vet=off -count=1 -p "$NIX_BUILD_CORES" ./...
            runHook postCheck
          '';
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
          # go_1_26: the Go the package builds with, whatever the branch's default.
          packages = [ pkgs.go_1_26 pkgs.gopls pkgs.opentofu pkgs.incus pkgs.nix pkgs.openssh ];
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

      # The package (its check phase runs every package's unit tier), our NixOS modules
      # built against nixpkgs on an Incus container and virtual machine (module-eval,
      # module-eval-vm), and the NixOS VM tests of SPEC 8, one per
      # file in nixos-tests/ (they need KVM: see the README).
      checks = forAllSystems (system: pkgs: {
        switchyard = self.packages.${system}.default;
        module-eval = import ./nix/module-eval.nix {
          inherit nixpkgs system self;
          instanceModule = "virtualisation/lxc-container.nix";
        };
        module-eval-vm = import ./nix/module-eval.nix {
          inherit nixpkgs system self;
          instanceModule = "virtualisation/incus-virtual-machine.nix";
        };
      } // import ./nixos-tests { inherit pkgs self; });
    };
}
