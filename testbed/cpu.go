package testbed

import (
	"bufio"
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
	f, err := os.Open(filepath.Join("/sys/fs/cgroup", name, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "usage_usec "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(n) * time.Microsecond, err == nil
		}
	}
	return 0, false
}
