# SPEC 8 and 9.2: a unit that systemd never spawned for a host reason, on a real NixOS
# target: named as a spawn fault, never blamed as a failed unit, and the deploy passes.
#
# The fault is 242/NUMA_POLICY (SPEC 4.2 lists it): the unit binds its memory to NUMA
# node 5, and the VM has one NUMA node (QEMU without -numa options), so set_mempolicy()
# fails in the exec stage, before the program runs: a fact of the host, not of the
# closure. The test bed's other fault, 214/SETSCHEDULER (a realtime scheduler), is a host
# fault only where the service manager lacks CAP_SYS_NICE, as in its unprivileged
# containers; root in a VM has it, so FIFO would simply work here. A missing User= (217)
# would be the closure's fault, not the host's.
{ self, pkgs }:
let
  inherit (pkgs) lib;
  common = import ./common.nix { inherit self pkgs; };

  systems = nodes: common.targetSystems nodes.target {
    spawn-fault = { pkgs, ... }: {
      imports = [ common.hello ];
      systemd.services.numa-pinned = {
        description = "switchyard test: binds its memory to NUMA node 5";
        wantedBy = [ "multi-user.target" ];
        serviceConfig = {
          ExecStart = "${pkgs.coreutils}/bin/sleep infinity";
          NUMAPolicy = "bind";
          NUMAMask = "5";
        };
      };
    };
  };
in
common.singleTarget {
  name = "deployment-verdict-spawn";
  inherit systems;
  script = s: ''
      with subtest("spawn-fault"):
          # The premise: one NUMA node.
          assert target.succeed("cat /sys/devices/system/node/online").strip() == "0"
          top = "${s.spawn-fault}"
          v = verdict(switchyard(f"deploy --node target --target root@target {SSH} --toplevel {top}", 0), "target")
          faults = {f["unit"]: f["status"] for f in v["units"]["spawn_faults"]}
          assert faults.get("numa-pinned.service", "").startswith("242/"), faults
          assert names(v, "failed") == [], v["units"]
          assert v["ok"] and running(target) == top, v
          # systemd's own record: the exec stage failed with 242, the program never ran.
          assert target.succeed("systemctl show -P ExecMainStatus numa-pinned.service").strip() == "242"
          target.succeed("systemctl is-active hello.service")
  '';
}
