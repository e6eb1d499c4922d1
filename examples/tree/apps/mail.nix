# The mail application (off in this example): relays the node's mail.
{ config, lib, ... }:
let
  settings = config.switchyard.plan.applications.mail;
in
{
  environment.etc."mail/relay".text = "${settings.relay}:${toString settings.port}\n";
}
