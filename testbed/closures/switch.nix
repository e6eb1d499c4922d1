# Test closures: closures for what switch-to-configuration does (exit 100, hung switches, boot entries).
# Imported by default.nix; `toplevel`, `service`, `payload` and `hello` are its builders.
{ toplevel, service, payload, hello }:
{
  # Healthy, but its init is incompatible with the running one (another
  # init-interface-version): switch-to-configuration installs the boot entry, then exits
  # 100 without activating, as NixOS's does when systemd's interface changed.
  needs-reboot = toplevel {
    name = "needs-reboot";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."init-interface-version" = "systemd switchyard-test-next";
  };

  # Healthy, but the switch installs the boot entry and then hangs (an hour) before it
  # activates: only the switch's bound (DEPLOY_SWITCH_TIMEOUT) ends it.
  hung-switch = toplevel {
    name = "hung-switch";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/switchyard-test/switch-delay" = "3600";
  };

  # Healthy, but one wanted oneshot's start never ends: NixOS's switch-to-configuration
  # repoints /run/current-system and then starts the units and waits for their jobs
  # (switch-to-configuration-ng), so the switch hangs after the link moved, and only
  # its bound (DEPLOY_SWITCH_TIMEOUT) ends it.
  late-hang = toplevel {
    name = "late-hang";
    units."hello.service" = hello;
    units."hangs.service" = service {
      description = "switchyard test: a oneshot whose start never ends";
      exec = "${payload}/bin/serve";
      service = "Type=oneshot\nTimeoutStartSec=infinity";
    };
    wants."multi-user.target" = [ "hello.service" "hangs.service" ];
  };

  # Healthy, but SSH goes down for 5 s right after the deployer has read the switch's
  # result (when it stops the switch's unit): the next command meets a dead connection.
  bounces-after-switch = toplevel {
    name = "bounces-after-switch";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
    files."etc/switchyard-test/bounce-after-switch" = "5";
  };

  # Healthy, but its activation stops sshd from taking new connections (as a moved
  # port, a firewall or a removed key would): a wanted oneshot stops the listening sshd
  # (Debian's ssh.service has KillMode=process, so open connections survive), and its
  # ExecStop starts it again when a switch to a generation without it stops it, as a
  # NixOS rollback restores sshd.
  cuts-ssh = toplevel {
    name = "cuts-ssh";
    units."hello.service" = hello;
    units."cut-ssh.service" = service {
      description = "switchyard test: no new SSH connections";
      exec = "/bin/systemctl --no-block stop ssh.service";
      service = "Type=oneshot\nRemainAfterExit=yes\nExecStop=/bin/systemctl --no-block start ssh.service";
    };
    wants."multi-user.target" = [ "hello.service" "cut-ssh.service" ];
  };

  # Healthy, but its activation moves sshd to port 2222 (the VM tier: its port
  # forward reaches port 22 only), as a changed services.openssh.ports would: a wanted
  # oneshot writes the port into sshd_config.d and restarts ssh.service (KillMode=process:
  # open connections survive). Its ExecStop puts port 22 back, as a switch to a
  # generation without it (the node's rollback) regenerates sshd_config on NixOS.
  moves-ssh-port = toplevel {
    name = "moves-ssh-port";
    units."hello.service" = hello;
    units."move-ssh-port.service" = service {
      description = "switchyard test: sshd on another port";
      exec = "/bin/sh -c 'echo Port 2222 >/etc/ssh/sshd_config.d/switchyard-test-port.conf && /bin/systemctl --no-block restart ssh.service'";
      service = "Type=oneshot\nRemainAfterExit=yes\nExecStop=/bin/sh -c 'rm -f /etc/ssh/sshd_config.d/switchyard-test-port.conf; /bin/systemctl --no-block restart ssh.service'";
    };
    wants."multi-user.target" = [ "hello.service" "move-ssh-port.service" ];
  };

  # Healthy, but without stage 2 ($out/init): the activation works, finalize cannot
  # point a container's /sbin/init at it (exit 3 after a verdict that passed).
  no-init = toplevel {
    name = "no-init";
    init = false;
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
  };
}
