# The hello application: prints its greeting, then stays up.
{ config, lib, ... }:
let
  settings = config.switchyard.plan.applications.hello;
in
{
  systemd.services.hello = {
    description = "switchyard example: hello";
    wantedBy = [ "multi-user.target" ];
    script = ''
      echo ${lib.escapeShellArg settings.greeting}
      exec sleep infinity
    '';
  };
}
