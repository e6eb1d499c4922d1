# web1: an Incus container.
{ ... }:
{
  imports = [ ./common.nix ];
}
