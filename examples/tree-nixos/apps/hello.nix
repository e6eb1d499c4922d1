# The hello application: prints its greeting, then stays up.
{ config, lib, pkgs, ... }:
let
  settings = config.switchyard.plan.applications.hello;
in
{
  systemd.services.hello = {
    description = "switchyard example: hello";
    wantedBy = [ "multi-user.target" ];
    script = ''
      echo ${lib.escapeShellArg settings.greeting}
      exec ${pkgs.coreutils}/bin/sleep infinity
    '';
  };
}
