# vm1: an Incus virtual machine (incus.type = "virtual-machine"); it boots with
# systemd-boot and runs incus-agent, which serves the guest API (/dev/incus/sock).
{ ... }:
{
  imports = [ ./common.nix ];
}
