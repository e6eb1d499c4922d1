# What the NixOS VM tests of this directory share (see default.nix): the deployer VM, the
# target VMs, the systems deployed to them, operator trees, and the Python helpers of the
# test scripts.
#
# Every test deploys with switchyard from a `deployer` VM to target VMs over SSH, the way
# nixpkgs' nixos/tests/nixos-rebuild-target-host.nix deploys with nixos-rebuild: the
# target's new systems are evaluated and built outside the VMs and put into the deployer's
# store (virtualisation.additionalPaths), since the VMs have neither a binary cache nor the
# sources to build from. A new system is the target's own test configuration (qemu-vm.nix
# and the test instrumentation, named outright, nixos/lib/testing/nixos-test-base.nix, plus
# the node's network as the framework exports it in system.build.networkConfig) with one
# change, so the switch leaves the test driver's backdoor and the network as they are.
{ self, pkgs }:
let
  inherit (pkgs) lib;
  system = pkgs.stdenv.hostPlatform.system;
  keys = import (pkgs.path + "/nixos/tests/ssh-keys.nix") pkgs;

  # The nixpkgs source as a store path string: the one the systems are evaluated from here
  # and, for trees, inside the deployer (`nixpkgs` of deployment.nix). A string keeps its
  # store path when interpolated; interpolating the path value pkgs.path would copy it
  # again under another name.
  nixpkgs = builtins.path { path = pkgs.path; name = "source"; };
  evalConfig = import (nixpkgs + "/nixos/lib/eval-config.nix");
  testBase = nixpkgs + "/nixos/lib/testing/nixos-test-base.nix";
  # The VM and the driver's backdoor, named outright as nixpkgs'
  # nixos/tests/nixos-rebuild-target-host.nix does: since the test framework adds
  # qemu-vm.nix in its own base only (nixpkgs PR #478109, nspawn test containers),
  # nixos-test-base.nix may not import it, and a system without it has no root file
  # system. Where the base still imports them, the module system takes each path once.
  vmModules = [
    (nixpkgs + "/nixos/modules/virtualisation/qemu-vm.nix")
    (nixpkgs + "/nixos/modules/testing/test-instrumentation.nix")
  ];
in
rec {
  switchyard = self.packages.${system}.default;

  # The deployer's public key as a Nix string literal, for module text.
  publicKeyLiteral = lib.strings.escapeNixString keys.snakeOilPublicKey;

  # The deployer: switchyard, the client key (installed by the test script), no
  # substituters. Each test adds the store paths it must hold, the systems to deploy, to
  # virtualisation.additionalPaths (in `config`: they depend on the `nodes` argument,
  # which `imports` cannot use).
  deployer = { lib, ... }: {
    environment.systemPackages = [ switchyard ];
    nix.settings.substituters = lib.mkForce [ ];
    virtualisation = {
      cores = lib.mkDefault 2;
      memorySize = lib.mkDefault 2048;
    };
  };

  # What every target runs, as started by the test and in every system deployed to it:
  # sshd taking the deployer's key for root, switch-to-configuration (test nodes leave it
  # out unless asked), and no boot loader: a test VM boots its kernel directly, so
  # `switch-to-configuration boot` (switchyard's finalize) sets no boot menu and the
  # system profile is the boot entry the tests check.
  target = { lib, ... }: {
    services.openssh.enable = true;
    users.users.root.openssh.authorizedKeys.keys = [ keys.snakeOilPublicKey ];
    system.switch.enable = true;
    boot.loader.grub.enable = false;
    documentation.enable = false;
    nix.settings.substituters = lib.mkForce [ ];
  };

  # A service that stays up.
  hello = { pkgs, ... }: {
    systemd.services.hello = {
      description = "switchyard test: a healthy service";
      wantedBy = [ "multi-user.target" ];
      serviceConfig.ExecStart = "${pkgs.coreutils}/bin/sleep infinity";
    };
  };

  # The systems deployed to the node `node` (its configuration as the test script sees it,
  # `nodes.<name>`): one toplevel per attribute of `variants`, each the node's test
  # configuration plus that module. Built here, outside the VMs.
  targetSystems = node: variants: lib.mapAttrs
    (_: extra: (evalConfig {
      inherit system;
      modules = vmModules ++ [ testBase node.system.build.networkConfig target extra ];
    }).config.system.build.toplevel)
    variants;

  # ---- Operator trees (SPEC 6.1) whose system is "nixos" ------------------------------
  #
  # switchyard evaluates such a tree inside the deployer (nix/build.nix: eval-config.nix
  # over the generated configuration.nix) and realises the toplevel. The same files are
  # evaluated here with the same nixpkgs source, so the deployer finds that toplevel
  # already valid in its store and builds nothing.

  # A host module of a tree, as text: the test framework's base modules and this VM's
  # network (the JSON nixos-rebuild-target-host's test writes too), the settings of
  # `target` above, and `extra` (more module text).
  hostText = networkConfig: extra: ''
    # A node of the test fleet (written by nixos-tests/common.nix): the test framework's
    # base modules and this VM's network, sshd for the deployer, switch-to-configuration,
    # no boot loader (the VM boots its kernel directly).
    { lib, modulesPath, ... }:
    {
      imports = [
        (modulesPath + "/virtualisation/qemu-vm.nix")
        (modulesPath + "/testing/test-instrumentation.nix")
        (modulesPath + "/../lib/testing/nixos-test-base.nix")
        (builtins.fromJSON ${lib.strings.escapeNixString (builtins.toJSON networkConfig)})
      ];
      services.openssh.enable = true;
      users.users.root.openssh.authorizedKeys.keys = [ ${publicKeyLiteral} ];
      system.switch.enable = true;
      boot.loader.grub.enable = false;
      documentation.enable = false;
      nix.settings.substituters = lib.mkForce [ ];
    ${extra}
    }
  '';

  # The `hello` application of the trees: a service, and the greeting its settings give
  # (switchyard.plan.applications.hello, SPEC 6.3) in /etc/hello/greeting.
  helloText = ''
    # The hello application: a service and its greeting, read from the node's plan.
    { config, pkgs, ... }:
    {
      environment.etc."hello/greeting".text = config.switchyard.plan.applications.hello.greeting + "\n";
      systemd.services.hello = {
        description = "switchyard test: the hello application";
        wantedBy = [ "multi-user.target" ];
        serviceConfig.ExecStart = "''${pkgs.coreutils}/bin/sleep infinity";
      };
    }
  '';

  # deployment.nix of a tree of one group `web` running `hello` with greeting "hi", its
  # nodes reached over SSH at `host` (a name ~/.ssh/config may map) as `user`, host keys
  # pinned from host-keys.json, which the test script writes from the VMs' own keys.
  deploymentText = nodeSpecs: ''
    # The test fleet's operator tree (SPEC 6.1), written by nixos-tests/common.nix.
    let
      # { <node> = "ssh-ed25519 AAAA..."; }, read by the test script from each VM.
      hostKeys = builtins.fromJSON (builtins.readFile ./host-keys.json);
    in
    {
      domain = "test.example";
      email = "ops@test.example";
      system = "nixos";
      nixpkgs = "${nixpkgs}";
      applications.hello = {
        enable = true;
        module = "apps/hello.nix";
        settings.greeting = "hi";
      };
      groups.web = {
        applications = [ "hello" ];
        nodes = {
    ${lib.concatMapStrings (n: ''
          ${n.name} = {
            modules = [ "hosts/${n.name}.nix" ];
            ssh = { host = "${n.host or n.name}"; user = "${n.user or "root"}"; hostKey = hostKeys.${n.name}; };
          };
    '') nodeSpecs}
        };
      };
      # One node evaluated at a time: a NixOS evaluation takes a good part of the VM.
      deployment-method.ssh.parallel = 1;
      # Where the submissions' credentials are staged (SPEC 6.9): the fleet key, and the
      # per-run directories the tests stage copies in.
      submissions.credentialDirs = [ "/root/.ssh" "/run/keys" ];
    }
  '';

  # A tree for `nodeSpecs` ([ { name; host?; user?; extra?; } ]), `nodes` being the test's
  # node configurations: `files` (path -> text) and `dir`, the tree as a store directory
  # of plain files (the test script copies it to /root/tree and adds host-keys.json).
  tree = nodes: nodeSpecs: rec {
    files = {
      "deployment.nix" = deploymentText nodeSpecs;
      "apps/hello.nix" = helloText;
    } // lib.listToAttrs (map
      (n: lib.nameValuePair "hosts/${n.name}.nix"
        (hostText nodes.${n.name}.system.build.networkConfig (n.extra or "")))
      nodeSpecs);
    dir = pkgs.runCommand "switchyard-test-tree" { } (lib.concatStrings (lib.mapAttrsToList
      (path: text: ''
        mkdir -p "$(dirname "$out/${path}")"
        cp ${pkgs.writeText "tree-file" text} "$out/${path}"
      '')
      files));
    # What nix/build.nix makes of node `name` with greeting "hi": eval-config.nix over
    # switchyard's module, the node's and hello's modules and the plan's settings.
    systems = lib.listToAttrs (map
      (n: lib.nameValuePair n.name (evalConfig {
        inherit system;
        modules = [
          (builtins.toFile "${n.name}.nix" files."hosts/${n.name}.nix")
          (builtins.toFile "hello.nix" files."apps/hello.nix")
          self.nixosModules.switchyard
          { switchyard.plan.applications.hello.greeting = "hi"; }
        ];
      }).config.system.build.toplevel)
      nodeSpecs);
    # The deployer evaluates with this nixpkgs source and finds these systems built.
    paths = [ nixpkgs dir ] ++ lib.attrValues systems;
  };

  # ~/.ssh/config of the deployer in the tests that reach nodes by alias.
  sshConfig = aliases: pkgs.writeText "ssh_config" (lib.concatStrings (lib.mapAttrsToList
    (alias: host: ''
      Host ${alias}
        HostName ${host}
        IdentityFile ~/.ssh/id_fleet
    '')
    aliases));

  # A test of one `target` deployed to from the `deployer`: `systems nodes` gives the
  # systems to deploy (the deployer holds them all), `script s` the test script after
  # the common start (both machines up, the deployer's key installed, the target's host
  # key pinned, DEPLOY the deploy command line without --toplevel), with `s` the systems.
  singleTarget = { name, systems, script }: {
    inherit name;
    nodes = {
      deployer = { nodes, ... }: {
        imports = [ deployer ];
        virtualisation.additionalPaths = lib.attrValues (systems nodes);
      };
      inherit target;
    };
    testScript = { nodes, ... }: python + ''
      start_all()
      deployer.wait_for_unit("multi-user.target")
      install_key()
      pin_host_key("target", target)

      DEPLOY = f"deploy --node target --target root@target {SSH}"

    '' + script (systems nodes);
  };

  # ---- Python helpers of the test scripts ---------------------------------------------
  python = ''
    import json

    # The test bed's fast verdict windows (cmd/switchyard fastEnv), a longer wait.
    FAST = "DEPLOY_SETTLE_ATTEMPTS=5 DEPLOY_CYCLE_INTERVAL=1 DEPLOY_CYCLE_WINDOWS=3 DEPLOY_WAIT_TIMEOUT=60"
    SSH = "--known-hosts /root/.ssh/known_hosts --ssh-key /root/.ssh/id_fleet"


    def run(args, env=""):
        # switchyard on the deployer with --output json: its exit code and its events
        # (JSON Lines on stdout, SPEC 2.2; progress and errors go to stderr, the log).
        status, out = deployer.execute(f"{FAST} {env} switchyard {args} --output json")
        events = [json.loads(line) for line in out.splitlines() if line.strip()]
        assert events, f"switchyard {args}: exit {status} and no events"
        summary = events[-1]
        assert summary["kind"] == "summary", f"the last event is not the summary: {summary}"
        assert summary["exit_code"] == status, f"summary exit_code {summary['exit_code']}, process exit {status}"
        return status, events


    def switchyard(args, want, env=""):
        status, events = run(args, env)
        dump = "\n".join(json.dumps(e) for e in events)
        assert status == want, f"switchyard {args}: exit {status}, want {want}\n{dump}"
        return events


    def refused(args, env=""):
        # A command that must be refused before anything changed: exit 2; its stderr.
        status, err = deployer.execute(f"{env} switchyard {args} 2>&1 >/dev/null")
        assert status == 2, f"switchyard {args}: exit {status}, want 2: {err}"
        return err


    def verdict(events, node):
        found = [e for e in events if e["kind"] == "verdict" and e["node"] == node]
        assert len(found) == 1, f"{len(found)} verdict events for {node}"
        return found[0]


    def names(v, cls):
        # The units of one class of a verdict, sorted; None when they were not read.
        listed = v["units"][cls]
        if listed is None:
            return None
        return sorted(u if isinstance(u, str) else u["unit"] for u in listed)


    def reasons(v):
        return "; ".join(v["reasons"])


    def logs(events, node):
        return [e["msg"] for e in events if e["kind"] == "log" and e["msg"].startswith(node + ": ")]


    def count(events, node, text):
        return sum(1 for m in logs(events, node) if text in m)


    def phase_states(events, node, phase):
        return [e["state"] for e in events if e["kind"] == "phase" and e["node"] == node and e["phase"] == phase]


    def install_key():
        deployer.succeed("install -D -m 600 ${keys.snakeOilPrivateKey} /root/.ssh/id_fleet")


    def pin_host_key(name, machine):
        # The deployer learns a node's host key out of band, from the VM itself, and
        # switchyard checks it on every connection: nothing is trusted on first use.
        machine.wait_for_unit("sshd.service")
        kind, key = machine.succeed("cat /etc/ssh/ssh_host_ed25519_key.pub").split()[:2]
        deployer.succeed(f"echo '{name} {kind} {key}' >> /root/.ssh/known_hosts")
        return f"{kind} {key}"


    def running(machine):
        return machine.succeed("readlink -f /run/current-system").strip()


    def profile(machine):
        return machine.succeed("readlink -f /nix/var/nix/profiles/system").strip()


  '';
}
