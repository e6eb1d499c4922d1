# Test closures: closures for switch-to-configuration-ng's unit rules (NG.md): a changed
# unit that is not restarted, a socket-activated service, a failed unit nothing pulls in.
# Imported by default.nix; `toplevel`, `service`, `payload` and `hello` are its builders,
# and `tag` its argument: here the tag also changes a unit's definition, so two tags
# are two generations of one configuration.
{ toplevel, service, payload, hello, tag }:
let
  # A socket-activated service on loopback inside the node; `broken` fails at once.
  socketActivated = { name, broken }: toplevel {
    inherit name;
    units."hello.service" = hello;
    units."echo.socket" = ''
      [Unit]
      Description=switchyard test: the socket of a socket-activated service
      [Socket]
      ListenStream=127.0.0.1:7777
    '';
    units."echo.service" = service {
      description = "switchyard test: a socket-activated service";
      exec = if broken then "${payload}/bin/fail" else "${payload}/bin/serve";
    };
    wants."multi-user.target" = [ "hello.service" ];
    wants."sockets.target" = [ "echo.socket" ];
  };
in
{
  # keeper.service has restartIfChanged = false (NixOS writes X-RestartIfChanged=false
  # into [Service]) and a definition that changes with the tag: a switch from one tag
  # to another leaves it running its previous definition.
  not-restarted = toplevel {
    name = "not-restarted";
    units."hello.service" = hello;
    units."keeper.service" = service {
      description = "switchyard test: not restarted when its definition changes";
      exec = "${payload}/bin/serve";
      service = ''
        Environment=SWITCHYARD_TEST_GENERATION=${if tag == "" then "none" else tag}
        X-RestartIfChanged=false
      '';
    };
    wants."multi-user.target" = [ "hello.service" "keeper.service" ];
  };

  # echo.service is started by its socket (sockets.target pulls echo.socket in);
  # socket-activated-broken is the same configuration with echo.service broken.
  socket-activated = socketActivated { name = "socket-activated"; broken = false; };
  socket-activated-broken = socketActivated { name = "socket-activated"; broken = true; };

  # manual.service fails at once, and nothing pulls it in: only a manual start runs it.
  unpulled-failure = toplevel {
    name = "unpulled-failure";
    units."hello.service" = hello;
    units."manual.service" = service {
      description = "switchyard test: fails on purpose, started by hand only";
      exec = "${payload}/bin/fail";
      service = "Type=oneshot";
    };
    wants."multi-user.target" = [ "hello.service" ];
  };

  # crash-at-once.service exits 3 as soon as it starts and is restarted after 2 s:
  # its start job succeeds, and ng counts it as failed afterwards (auto-restart with a
  # non-zero ExecMainStatus): exit 4.
  crash-at-once = toplevel {
    name = "crash-at-once";
    units."hello.service" = hello;
    units."crash-at-once.service" = service {
      description = "switchyard test: exits 3 at once, restarted";
      exec = "${payload}/bin/fail";
      extra = "StartLimitIntervalSec=0";
      service = ''
        Restart=always
        RestartSec=2
      '';
    };
    wants."multi-user.target" = [ "hello.service" "crash-at-once.service" ];
  };

  # The three together, for the verdict's recording of a switch (verdict/testdata/
  # ng-switch): keeper.service and echo.service change with the tag; manual.service
  # fails when started, and nothing pulls it in.
  ng-switch = toplevel {
    name = "ng-switch";
    units."hello.service" = hello;
    units."keeper.service" = service {
      description = "switchyard test: not restarted when its definition changes";
      exec = "${payload}/bin/serve";
      service = ''
        Environment=SWITCHYARD_TEST_GENERATION=${if tag == "" then "none" else tag}
        X-RestartIfChanged=false
      '';
    };
    units."echo.socket" = ''
      [Unit]
      Description=switchyard test: the socket of a socket-activated service
      [Socket]
      ListenStream=127.0.0.1:7777
    '';
    units."echo.service" = service {
      description = "switchyard test: a socket-activated service";
      exec = "${payload}/bin/serve";
      service = "Environment=SWITCHYARD_TEST_GENERATION=${if tag == "" then "none" else tag}";
    };
    units."manual.service" = service {
      description = "switchyard test: fails on purpose, started by hand only";
      exec = "${payload}/bin/fail";
      service = "Type=oneshot";
    };
    wants."multi-user.target" = [ "hello.service" "keeper.service" ];
    wants."sockets.target" = [ "echo.socket" ];
  };

  # reloader.service has reloadIfChanged = true (NixOS writes X-ReloadIfChanged=true
  # into [Service]) and a definition that changes with the tag: ng reloads it rather
  # than restarting it, and its ExecReload appends the tag to
  # /run/switchyard-test-reloads.
  reload-if-changed = toplevel {
    name = "reload-if-changed";
    units."hello.service" = hello;
    units."reloader.service" = service {
      description = "switchyard test: reloaded when its definition changes";
      exec = "${payload}/bin/serve";
      service = ''
        Environment=SWITCHYARD_TEST_GENERATION=${if tag == "" then "none" else tag}
        ExecReload=/bin/sh -c 'echo "$SWITCHYARD_TEST_GENERATION" >>/run/switchyard-test-reloads'
        X-ReloadIfChanged=true
      '';
    };
    wants."multi-user.target" = [ "hello.service" "reloader.service" ];
  };

  # lingerer.service sets X-StopOnRemoval=false in [Unit]; stop-on-removal-gone is the
  # next generation of the same configuration without it: ng leaves it running.
  stop-on-removal = toplevel {
    name = "stop-on-removal";
    units."hello.service" = hello;
    units."lingerer.service" = service {
      description = "switchyard test: kept running when the configuration drops it";
      exec = "${payload}/bin/serve";
      extra = "X-StopOnRemoval=false";
    };
    wants."multi-user.target" = [ "hello.service" "lingerer.service" ];
  };
  stop-on-removal-gone = toplevel {
    name = "stop-on-removal";
    units."hello.service" = hello;
    wants."multi-user.target" = [ "hello.service" ];
  };
}
