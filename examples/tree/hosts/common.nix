# What every web node shares.
{ config, ... }:
{
  networking.domain = config.switchyard.plan.domain;
  security.acme.defaults.email = config.switchyard.plan.email;
  system.stateVersion = "25.05";
}
