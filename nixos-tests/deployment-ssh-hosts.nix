# SPEC 8, 3 and 5 (ssh): the ssh method over an operator tree, `switchyard ssh apply
# --tree`, on two NixOS VMs. The tree names the nodes by aliases that the deployer's
# ~/.ssh/config maps to the VMs (HostName) together with the key (IdentityFile); each
# node's host key is pinned in the tree. web2 is reached as `deploy`, a user with
# passwordless sudo: every command runs through `sudo -n`. A user without that right is
# refused at once (exit 3). A node that does not answer is reported unreachable (exit 3)
# while the other goes on (SPEC 9.8).
{ self, pkgs }:
let
  inherit (pkgs) lib;
  common = import ./common.nix { inherit self pkgs; };

  # web2's users, as module text: in the tree's host module and in the VM as started.
  web2Users = ''
    users.users.deploy = {
      isNormalUser = true;
      openssh.authorizedKeys.keys = [ ${common.publicKeyLiteral} ];
    };
    users.users.nosudo = {
      isNormalUser = true;
      openssh.authorizedKeys.keys = [ ${common.publicKeyLiteral} ];
    };
    security.sudo.extraRules = [
      { users = [ "deploy" ]; commands = [ { command = "ALL"; options = [ "NOPASSWD" ]; } ]; }
    ];
  '';

  fleet = nodes: common.tree nodes [
    { name = "web1"; host = "front"; }
    { name = "web2"; host = "back"; user = "deploy"; extra = web2Users; }
  ];

  sshConfig = common.sshConfig { front = "web1"; back = "web2"; };
in
{
  name = "deployment-ssh-hosts";

  nodes = {
    deployer = { nodes, ... }: {
      imports = [ common.deployer ];
      virtualisation.additionalPaths = (fleet nodes).paths;
      # The deployer evaluates the nodes' NixOS configurations itself.
      virtualisation.memorySize = 4096;
    };
    web1 = common.target;
    web2 = {
      imports = [ common.target (import (builtins.toFile "web2-users.nix" "{ ... }: {\n${web2Users}\n}")) ];
    };
  };

  testScript = { nodes, ... }:
    let
      t = fleet nodes;
    in
    common.python + ''
      import time

      start_all()
      deployer.wait_for_unit("multi-user.target")
      install_key()
      host_keys = {"web1": pin_host_key("web1", web1), "web2": pin_host_key("web2", web2)}
      deployer.succeed(
          "cp -r --no-preserve=mode ${t.dir} /root/tree",
          f"echo '{json.dumps(host_keys)}' > /root/tree/host-keys.json",
          "install -m 600 ${sshConfig} /root/.ssh/config",
      )

      APPLY = "ssh apply --tree /root/tree"

      with subtest("ssh-config"):
          # No key on the command line or in a submission: the alias's IdentityFile.
          top = "${t.systems.web1}"
          v = verdict(switchyard(f"{APPLY} --node web1", 0), "web1")
          assert v["ok"] and v["switch"]["result"] == "ok" and v["toplevel"] == top, v
          assert "web1:22" in v["target"], v
          assert running(web1) == top and profile(web1) == top
          assert web1.succeed("cat /etc/hello/greeting").strip() == "hi"
          web1.succeed("systemctl is-active hello.service")

      with subtest("sudo-user"):
          top = "${t.systems.web2}"
          # Without passwordless sudo: exit 3 at once, naming sudo; nothing copied.
          start = time.monotonic()
          v = verdict(switchyard(f"deploy --node web2 --target nosudo@back --toplevel {top}", 3, "DEPLOY_WAIT_TIMEOUT=120"), "web2")
          assert time.monotonic() - start < 60, "a missing sudo right must not wait for DEPLOY_WAIT_TIMEOUT"
          assert not v["ok"] and "sudo" in reasons(v), v
          web2.fail(f"nix-store --check-validity {top}")
          # As `deploy`, through sudo -n: deployed, and the closure is root's like any copy.
          v = verdict(switchyard(f"{APPLY} --node web2", 0), "web2")
          assert v["ok"] and v["switch"]["result"] == "ok" and v["toplevel"] == top, v
          assert running(web2) == top and profile(web2) == top
          assert web2.succeed(f"stat -c %U {top}").strip() == "root"
          web2.succeed("systemctl is-active hello.service")

      with subtest("unreachable"):
          # SPEC 9.8: web1 stops answering; it is reported unreachable within
          # DEPLOY_WAIT_TIMEOUT, exit 3, and web2 is judged all the same.
          web1.succeed("systemctl stop sshd.service")
          start = time.monotonic()
          events = switchyard(APPLY, 3, "DEPLOY_WAIT_TIMEOUT=5")
          assert time.monotonic() - start < 180, "the unreachable node held the run up"
          down, up = verdict(events, "web1"), verdict(events, "web2")
          assert down["reachable"] is False and down["exit_code"] == 3 and not down["ok"], down
          assert names(down, "failed") is None, down["units"]
          assert "unreachable" in reasons(down), down
          assert up["ok"] and up["switch"]["result"] == "unchanged", up
          summary = events[-1]
          assert (summary["nodes"], summary["ok"], summary["failed"]) == (2, 1, 1), summary
          web1.succeed("systemctl start sshd.service")
    '';
}
