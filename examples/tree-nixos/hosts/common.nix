# What every node shares. The instance itself (container or VM: boot, file systems,
# /sbin/init or systemd-boot) comes from the nixpkgs module the generated
# configuration.nix imports for the node's `incus.type`, not from here.
{ config, ... }:
{
  networking.hostName = config.switchyard.plan.node;
  networking.domain = config.switchyard.plan.domain;
  system.stateVersion = "26.05";
}
