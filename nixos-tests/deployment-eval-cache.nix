# SPEC 8, 6.6 and 9.12: the eval cache. A second `switchyard ssh apply` with nothing
# changed evaluates nothing (DEPLOY_EVAL_CACHE_DIR maps nixos_conf to the toplevel's
# derivation), builds nothing, copies nothing beyond the one query, switches nothing, opens
# one SSH connection, and still judges the node: "unchanged". A plan and the apply of that
# plan evaluate once. The cache is never a source of truth: deleted, the apply evaluates
# again to the same system; unwritable, the apply still works.
{ self, pkgs }:
let
  common = import ./common.nix { inherit self pkgs; };

  fleet = nodes: common.tree nodes [ { name = "web1"; } ];
in
{
  name = "deployment-eval-cache";

  nodes = {
    deployer = { nodes, ... }: {
      imports = [ common.deployer ];
      virtualisation.additionalPaths = (fleet nodes).paths;
      # The deployer evaluates the node's NixOS configuration itself.
      virtualisation.memorySize = 4096;
    };
    web1 = common.target;
  };

  testScript = { nodes, ... }:
    let
      t = fleet nodes;
    in
    common.python + ''
      start_all()
      deployer.wait_for_unit("multi-user.target")
      install_key()
      host_keys = {"web1": pin_host_key("web1", web1)}
      deployer.succeed(
          "cp -r --no-preserve=mode ${t.dir} /root/tree",
          f"echo '{json.dumps(host_keys)}' > /root/tree/host-keys.json",
      )

      TOP = "${t.systems.web1}"
      CACHE = "/var/cache/switchyard-eval"
      SUBMISSION = json.dumps({"deployment-method": {"ssh": {"sshKeyFile": "/root/.ssh/id_fleet"}}})
      ENV = f"DEPLOYMENT='{SUBMISSION}' DEPLOY_EVAL_CACHE_DIR={CACHE}"
      APPLY = "ssh apply --tree /root/tree"


      def accepted():
          # SSH connections web1 accepted so far.
          out = web1.succeed("journalctl --unit sshd.service --output cat | grep -c 'Accepted publickey' || true")
          return int(out.strip())


      def unchanged(events):
          v = verdict(events, "web1")
          assert v["ok"] and v["switch"]["result"] == "unchanged" and v["toplevel"] == TOP, v
          for ph in ["switch", "finalize"]:
              states = phase_states(events, "web1", ph)
              assert all(st == "skipped" for st in states), f"{ph} ran on an unchanged node: {states}"
          assert running(web1) == TOP


      with subtest("nothing-changed"):
          events = switchyard(APPLY, 0, ENV)
          v = verdict(events, "web1")
          assert v["ok"] and v["switch"]["result"] == "ok" and v["toplevel"] == TOP, v
          assert count(events, "web1", "build: evaluated") == 1, logs(events, "web1")
          deployer.succeed(f"test -n \"$(ls -A {CACHE})\"")
          before = accepted()
          events = switchyard(APPLY, 0, ENV)
          unchanged(events)
          msgs = logs(events, "web1")
          assert count(events, "web1", "build: evaluated") == 0, msgs
          assert count(events, "web1", "build: eval cache hit") == 1, msgs
          assert count(events, "web1", "build: already built") == 1, msgs
          pushes = [m for m in msgs if "push: " in m]
          assert len(pushes) == 1 and " 0 missing, 0 sent" in pushes[0], pushes
          # One TCP connection for the whole deploy, every command a session on it.
          assert accepted() - before == 1, accepted() - before

      with subtest("plan-then-apply"):
          # plan --out then apply --plan: the node is evaluated once across both, and an
          # apply with another DEPLOYMENT than the plan's is refused.
          deployer.succeed(f"rm -rf {CACHE}")
          events = switchyard("ssh plan --tree /root/tree --out /root/plan.json", 0, ENV)
          planned = [e for e in events if e["kind"] == "plan"]
          assert len(planned) == 1 and planned[0]["node"] == "web1", planned
          assert len(planned[0]["nixos_conf"]) == 64 and planned[0]["changed"] is False, planned
          other = json.dumps({"deployment-method": {"ssh": {"sshKeyFile": "/root/.ssh/id_fleet", "applications": {"hello": {"enable": True, "settings": {"greeting": "hey"}}}}}})
          err = refused("ssh apply --tree /root/tree --plan /root/plan.json", f"DEPLOYMENT='{other}' DEPLOY_EVAL_CACHE_DIR={CACHE}")
          assert "DEPLOYMENT differs" in err, err
          events = switchyard("ssh apply --tree /root/tree --plan /root/plan.json", 0, ENV)
          assert count(events, "web1", "build: evaluated") == 0, logs(events, "web1")
          unchanged(events)

      with subtest("cache-not-a-source-of-truth"):
          # Deleted: evaluated again, to the same system.
          deployer.succeed(f"rm -rf {CACHE}")
          events = switchyard(APPLY, 0, ENV)
          assert count(events, "web1", "build: evaluated") == 1, logs(events, "web1")
          unchanged(events)
          # A cache directory that cannot be written is not an error.
          events = switchyard(APPLY, 0, f"DEPLOYMENT='{SUBMISSION}' DEPLOY_EVAL_CACHE_DIR=/proc/switchyard-eval")
          assert count(events, "web1", "build: evaluated") == 1, logs(events, "web1")
          unchanged(events)
    '';
}
