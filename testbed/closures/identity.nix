# Test closures: a tenant's node under tf-incus-operator (SPEC 7.1): two applications'
# units, an address Incus reports, and units that wait for the node's workload identity.
# Imported by default.nix; `toplevel`, `service`, `payload` and `hello` are its builders.
{ toplevel, service, payload, hello }:
let
  token = "/var/lib/switchyard/spire/join-token";

  scripts = derivation {
    name = "switchyard-test-tenant";
    system = builtins.currentSystem;
    builder = "/bin/sh";
    args = [ "-c" ''
      set -e
      /bin/mkdir -p $out/bin
      # An address in the node's own network namespace (a veth pair inside the
      # container: no packet leaves it), from documentation ranges, derived from the
      # host name so that two nodes differ. Incus reports it; the graph publishes it.
      /bin/cat > $out/bin/address <<'SCRIPT'
      #!/bin/sh
      set -e
      n=$(( $(/bin/hostname | /usr/bin/cksum | /usr/bin/cut -d' ' -f1) % 250 + 2 ))
      /bin/ip link add sw0 type veth peer name sw1 2>/dev/null || true
      /bin/ip addr replace 192.0.2.$n/32 dev sw0
      /bin/ip -6 addr replace 2001:db8::$n/128 dev sw0 nodad
      /bin/ip link set sw1 up
      /bin/ip link set sw0 up
      SCRIPT
      # The stand-in for the node's SPIRE agent: it needs the join token, which must be
      # private to root.
      /bin/cat > $out/bin/agent <<'SCRIPT'
      #!/bin/sh
      set -e
      f=${token}
      [ -s "$f" ] || { echo "no join token at $f" >&2; exit 1; }
      [ "$(/usr/bin/stat -c %a:%u "$f")" = 600:0 ] || { echo "join token not 0600 root" >&2; exit 1; }
      SCRIPT
      /bin/sed -i 's/^      //' $out/bin/address $out/bin/agent
      /bin/chmod +x $out/bin/*
    '' ];
  };

  address = service {
    description = "switchyard test: the node's address";
    exec = "${scripts}/bin/address";
    service = "Type=oneshot\nRemainAfterExit=yes";
  };

  mail = service {
    description = "switchyard test: the second application";
    exec = "${payload}/bin/serve";
  };
in
{
  # Both applications up, an address, and the agent started by its path unit once the
  # join token is there (as a NixOS spire-agent would wait for it).
  tenant = toplevel {
    name = "tenant";
    units."hello.service" = hello;
    units."mail.service" = mail;
    units."address.service" = address;
    units."identity-agent.path" = ''
      [Unit]
      Description=switchyard test: waits for the node's join token
      [Path]
      PathExists=${token}
      Unit=identity-agent.service
      [Install]
      WantedBy=multi-user.target
    '';
    units."identity-agent.service" = service {
      description = "switchyard test: the node's agent, started once its join token is there";
      exec = "${scripts}/bin/agent";
      service = "Type=oneshot\nRemainAfterExit=yes";
    };
    wants."multi-user.target" = [ "hello.service" "mail.service" "address.service" "identity-agent.path" ];
  };

  # As tenant, plus a unit that fails while the node has no identity: the deploy's
  # pass finds it failed; the pass after registration sweeps it and it comes up.
  tenant-needs-identity = toplevel {
    name = "tenant-needs-identity";
    units."hello.service" = hello;
    units."mail.service" = mail;
    units."address.service" = address;
    units."needs-identity.service" = service {
      description = "switchyard test: fails without the node's join token";
      exec = "${scripts}/bin/agent";
      service = "Type=oneshot\nRemainAfterExit=yes";
    };
    wants."multi-user.target" = [ "hello.service" "mail.service" "address.service" "needs-identity.service" ];
  };
}
