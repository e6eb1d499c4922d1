{ config, ... }:
{
  imports = [ ./hello-common.nix ];
  environment.etc.motd.source = config.switchyard.plan.applications.hello.motd;
}
