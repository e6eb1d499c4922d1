# web1: its own settings; the shared ones come from ./common.nix.
{ config, ... }:
{
  imports = [ ./common.nix ];
  networking.hostName = config.switchyard.plan.node;
}
