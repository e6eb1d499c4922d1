# SPEC 8, 6.1-6.4: an operator tree whose `system` is "nixos", deployed with `switchyard
# ssh apply` to two NixOS VMs. The deployer evaluates each node's generated
# configuration.nix with nixpkgs (the tree's `nixpkgs`, this test's own source), finds its
# toplevel built, copies and switches it; the application's settings reach the system
# (/etc/hello/greeting from switchyard.plan), and a second apply finds both nodes
# unchanged. A submission's credential paths do not change nixos_conf, and a bad
# submission is refused before anything changes (SPEC 9.11).
{ self, pkgs }:
let
  common = import ./common.nix { inherit self pkgs; };

  fleet = nodes: common.tree nodes [ { name = "web1"; } { name = "web2"; } ];
in
{
  name = "deployment-nixos-hosts";

  nodes = {
    deployer = { nodes, ... }: {
      imports = [ common.deployer ];
      virtualisation.additionalPaths = (fleet nodes).paths;
      # The deployer evaluates the nodes' NixOS configurations itself.
      virtualisation.memorySize = 4096;
    };
    web1 = common.target;
    web2 = common.target;
  };

  testScript = { nodes, ... }:
    let
      t = fleet nodes;
    in
    common.python + ''
      start_all()
      deployer.wait_for_unit("multi-user.target")
      install_key()
      host_keys = {"web1": pin_host_key("web1", web1), "web2": pin_host_key("web2", web2)}
      deployer.succeed(
          "cp -r --no-preserve=mode ${t.dir} /root/tree",
          f"echo '{json.dumps(host_keys)}' > /root/tree/host-keys.json",
      )

      SUBMISSION = json.dumps({"deployment-method": {"ssh": {"sshKeyFile": "/root/.ssh/id_fleet"}}})
      ENV = f"DEPLOYMENT='{SUBMISSION}'"
      APPLY = "ssh apply --tree /root/tree"
      EXPECTED = {"web1": (web1, "${t.systems.web1}"), "web2": (web2, "${t.systems.web2}")}

      with subtest("nixos-apply"):
          events = switchyard(APPLY, 0, ENV)
          for name, (machine, top) in EXPECTED.items():
              v = verdict(events, name)
              assert v["ok"] and v["switch"]["result"] == "ok", v
              # Evaluated in the deployer to exactly the system built outside it.
              assert v["toplevel"] == top and v["boot_entry"] == top, v
              assert running(machine) == top and profile(machine) == top
              machine.succeed("systemctl is-active hello.service")
              assert machine.succeed("cat /etc/hello/greeting").strip() == "hi"
          plan = json.loads(deployer.succeed("cat /root/tree/.switchyard/nodes/web1/plan.json"))
          assert plan["applications"] == {"hello": {"greeting": "hi"}}, plan
          assert "id_fleet" not in json.dumps(plan), plan
          # Nothing changed: each node judged as it runs, nothing switched.
          events = switchyard(APPLY, 0, ENV)
          for name, (machine, top) in EXPECTED.items():
              v = verdict(events, name)
              assert v["ok"] and v["switch"]["result"] == "unchanged" and v["toplevel"] == top, v
              assert running(machine) == top
          assert events[-1]["nodes"] == 2 and events[-1]["ok"] == 2, events[-1]

      with subtest("credential-paths"):
          # The same key staged at two paths: the same nixos_conf, and no plan holds it.
          deployer.succeed(
              "install -D -m 600 /root/.ssh/id_fleet /run/keys/run-a/id",
              "install -D -m 600 /root/.ssh/id_fleet /run/keys/run-b/id",
          )
          confs = []
          for key in ["/run/keys/run-a/id", "/run/keys/run-b/id"]:
              sub = json.dumps({"deployment-method": {"ssh": {"sshKeyFile": key}}})
              events = switchyard("ssh plan --tree /root/tree", 0, f"DEPLOYMENT='{sub}'")
              planned = {e["node"]: (e["nixos_conf"], e["changed"]) for e in events if e["kind"] == "plan"}
              confs.append(planned)
              deployer.fail(f"grep -r {key} /root/tree/.switchyard/nodes")
          assert confs[0] == confs[1], confs
          assert sorted(confs[0]) == ["web1", "web2"], confs
          assert all(not changed for _, changed in confs[0].values()), confs

      with subtest("submission-refused"):
          # Refused with exit 2, naming the JSON path, before any node changes.
          for sub, path in [
              ('{"deployment-method":{"ssh":{"applications":{"wiki":{}}}}}', "deployment-method.ssh.applications.wiki"),
              ('{"deployment-method":{"ssh":{"applications":{"hello":{"settings":{"greeting":7}}}}}}', "deployment-method.ssh.applications.hello.settings.greeting"),
              ('{"deployment-method":{"ssh":{"colour":"blue"}}}', "deployment-method.ssh.colour"),
              ('{"deployment-method":{"tf":{}}}', "deployment-method.tf"),
          ]:
              err = refused(APPLY, f"DEPLOYMENT='{sub}'")
              assert path in err, f"{sub}: {err}"
          for name, (machine, top) in EXPECTED.items():
              assert running(machine) == top, name
    '';
}
