# An example operator tree (SPEC 6.1): one group of two web nodes reached over SSH,
# running the `hello` application (`mail` is defined but off).
#
#   switchyard ssh names  --tree examples/tree
#   switchyard ssh schema --tree examples/tree
#   DEPLOYMENT='{"deployment-method":{"ssh":{"applications":{"hello":{"enable":true,"settings":{"greeting":"hey"}}}}}}' \
#     switchyard ssh plan --tree examples/tree
#
# The hosts and host keys are placeholders: loopback ports where nothing is expected to
# listen (and whose host keys would not match), so trying the tree as it is sends no packet
# off this machine. Put your nodes' addresses and their /etc/ssh/ssh_host_ed25519_key.pub
# here, or in local.nix (below).
#
# `system` names the tree's builder: this example builds without nixpkgs, from the test
# bed's closures (builder.nix). A real tree sets `system = "nixos";` and `nixpkgs`, and
# gives each SSH node the machine's own NixOS modules (its hardware-configuration.nix:
# root file system and boot loader), without which NixOS does not evaluate; Incus nodes
# get theirs from switchyard (lxc-container.nix or incus-virtual-machine.nix).
#
# A gitignored `local.nix` next to this file, when present, overrides nodes' ssh
# settings for this machine (the README's main job writes one for its throwaway node):
#   { web1 = { host = "127.0.0.1"; port = 40022; hostKey = "ssh-ed25519 AAAA..."; }; }
let
  local = if builtins.pathExists ./local.nix then import ./local.nix else { };
  ssh = name: settings: settings // (local.${name} or { });
in
{
  domain = "example.org";
  email = "ops@example.org";
  system = "builder.nix";

  applications = {
    hello = {
      enable = true;
      module = "apps/hello.nix";
      # Typed by their values: a DEPLOYMENT may set greeting to another string and
      # closure to another test closure (healthy, failed-unit, restart-loop, ...).
      settings = { greeting = "hi"; closure = "healthy"; };
    };
    mail = {
      enable = false;
      module = "apps/mail.nix";
      settings = { relay = "smtp.example.org"; port = 587; };
    };
  };

  # What a submission may set (SPEC 6.9). A credential it names (sshKeyFile, ...) must be
  # a file of the deployer's user, mode 0600, under one of these directories, where the
  # API stages each run's secrets (or under $SWITCHYARD_CREDENTIAL_DIRS or systemd's
  # $CREDENTIALS_DIRECTORY); anchors (knownHostsFile, stateBackend, project, dnsServer, ...)
  # come from deployment-method below only.
  submissions.credentialDirs = [ "/run/switchyard-api/credentials" ];

  groups.web = {
    # The domains a submission for this group may choose (each with its subdomains).
    domains = [ "example.org" ];
    applications = [ "hello" "mail" ];
    nodes.web1 = {
      modules = [ "hosts/web1.nix" ];
      ssh = ssh "web1" {
        host = "127.0.0.1";
        port = 40011;
        user = "root";
        hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4inzM5jOx8xxmjhITtKFD7q0B50Pu07HOHGjAEY+JB placeholder";
      };
    };
    nodes.web2 = {
      modules = [ "hosts/web2.nix" ];
      ssh = ssh "web2" {
        host = "127.0.0.1";
        port = 40012;
        user = "root";
        hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAID3U6FhYajg1hJyGRciaoYCKKngatXm7/Bwaxg60HBwY placeholder";
      };
    };
  };

  deployment-method.ssh = { parallel = 2; };
}
