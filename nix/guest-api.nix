# switchyard's guest-API module for Incus nodes: addresses and other run-time values are
# read from the Incus guest API (/dev/incus/sock) when the node boots, never baked into
# the plan (SPEC 6.3). The generated configuration.nix of an incus node imports it and
# enables it.
#
# switchyard-guest-api.service (a oneshot, before network-online.target) writes every
# `user.switchyard.*` configuration key of the instance to
# /run/switchyard/guest/<key without the prefix>, and the instance's own state to
# /run/switchyard/guest/instance.json. Units that need an address order themselves
# after it and read those files.
{ config, lib, pkgs, ... }:
let
  cfg = config.switchyard.guestApi;
  script = pkgs.writeShellScript "switchyard-guest-api" ''
    set -eu
    sock=/dev/incus/sock
    out=/run/switchyard/guest
    get() { ${pkgs.curl}/bin/curl --silent --show-error --fail --unix-socket "$sock" "http://incus$1"; }
    mkdir -p "$out"
    get /1.0 > "$out/instance.json.new"
    mv "$out/instance.json.new" "$out/instance.json"
    for key in $(get /1.0/config | ${pkgs.jq}/bin/jq -r '.[]'); do
      name=''${key##*/}
      case "$name" in
        ${cfg.prefix}*) get "$key" > "$out/''${name#${cfg.prefix}}" ;;
      esac
    done
  '';
in
{
  key = "switchyard/nix/guest-api.nix";

  options.switchyard.guestApi = {
    enable = lib.mkEnableOption "reading run-time values from the Incus guest API";
    prefix = lib.mkOption {
      type = lib.types.str;
      default = "user.switchyard.";
      description = "Instance configuration keys with this prefix are written under /run/switchyard/guest.";
    };
  };

  config = lib.mkIf cfg.enable {
    systemd.services.switchyard-guest-api = {
      description = "switchyard: read run-time values from the Incus guest API";
      wantedBy = [ "multi-user.target" ];
      before = [ "network-online.target" ];
      # In an Incus VM /dev/incus/sock is served by the Incus agent (nixpkgs'
      # incus-virtual-machine.nix sets `virtualisation.incus.agent.enable = lib.mkDefault
      # true`, whose incus-agent.service is wantedBy multi-user.target), so the socket's
      # condition is checked only after the agent has started. In a container the daemon
      # bind-mounts the socket and there is no incus-agent.service: the ordering is then
      # void, and nothing wants a unit that does not exist.
      after = [ "incus-agent.service" ];
      wants = lib.optional (config.virtualisation.incus.agent.enable or false) "incus-agent.service";
      unitConfig.ConditionPathExists = "/dev/incus/sock";
      serviceConfig = {
        Type = "oneshot";
        RemainAfterExit = true;
        ExecStart = script;
      };
    };
  };
}
