package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// InstanceCPU is the CPU time an Incus container has used so far, from its cgroup:
// cgroup v1's cpuacct.usage, else v2's cpu.stat. ok is false when neither can be
// read (another cgroup layout, or no such container). The benchmark and the copy
// measurements read it before and after what they measure.
func InstanceCPU(instance string) (d time.Duration, ok bool) {
	name := "lxc.payload." + instance
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", name, "cpuacct.usage")); err == nil {
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(n), err == nil
	}
	return usage(filepath.Join("/sys/fs/cgroup", name))
}

// CPUParts is a container's CPU time split by where inside it it went, from the
// cgroups its own systemd made.
type CPUParts struct {
	All  time.Duration // the whole container
	SSH  time.Duration // the ssh service: sshd, its sessions and every command run over them (a deployer's commands and copy)
	PID1 time.Duration // init.scope: systemd itself (its D-Bus answers, its unit jobs)
}

// Rest is what neither sshd's tree nor PID 1 spent: the units systemd ran (a
// switch's transient unit and what it started), journald and the like.
func (p CPUParts) Rest() time.Duration { return p.All - p.SSH - p.PID1 }

// Add is p and q together (two nodes' readings summed).
func (p CPUParts) Add(q CPUParts) CPUParts {
	return CPUParts{All: p.All + q.All, SSH: p.SSH + q.SSH, PID1: p.PID1 + q.PID1}
}

// Sub is p less an earlier reading.
func (p CPUParts) Sub(q CPUParts) CPUParts {
	return CPUParts{All: p.All - q.All, SSH: p.SSH - q.SSH, PID1: p.PID1 - q.PID1}
}

// InstanceCPUParts reads an Incus container's CPUParts from the cgroup v2 tree its
// systemd keeps (under /sys/fs/cgroup/unified on a hybrid host, else
// /sys/fs/cgroup). ok is false when that tree cannot be read (a v1-only host, no
// such container, or a node with neither ssh.service nor sshd.service).
func InstanceCPUParts(instance string) (CPUParts, bool) {
	for _, base := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if p, ok := cpuParts(filepath.Join(base, "lxc.payload."+instance)); ok {
			return p, true
		}
	}
	return CPUParts{}, false
}

// cpuParts reads CPUParts under a container's cgroup directory root: the ssh service
// is Debian's ssh.service or NixOS's sshd.service.
func cpuParts(root string) (CPUParts, bool) {
	var p CPUParts
	var ok bool
	if p.All, ok = usage(root); !ok {
		return CPUParts{}, false
	}
	if p.PID1, ok = usage(filepath.Join(root, "init.scope")); !ok {
		return CPUParts{}, false
	}
	for _, unit := range []string{"ssh.service", "sshd.service"} {
		if p.SSH, ok = usage(filepath.Join(root, "system.slice", unit)); ok {
			return p, true
		}
	}
	return CPUParts{}, false
}

// usage is a cgroup v2 directory's cpu.stat usage_usec.
func usage(dir string) (time.Duration, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(n) * time.Microsecond, err == nil
		}
	}
	return 0, false
}
