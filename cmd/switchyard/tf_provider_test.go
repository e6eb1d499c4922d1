package main_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 31 item 9: the provider exits when OpenTofu dies. During a tf apply whose
// switch takes 15 s, only OpenTofu is SIGKILLed (not switchyard, not the process
// group). The provider, silent while it waits for the switch, must end within a few
// seconds rather than run the deploy on for nobody (it ends in about 50 ms: the
// plugin server goes with its client); the rerun right after is not refused by it
// and converges.
func TestTFProviderExitsWithOpenTofu(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "tf", "slow-switch", map[string]*testbed.Node{"web1": node})
	env := []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir(), "BOOTSTRAP=1", "BOOTSTRAP_SEED=x"}

	run := startSwitchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	e := awaitJournaledSwitch(t, tree, run)
	provider := int(e["pid"].(float64))
	tofu := parentOf(t, provider)
	if tofu == run.cmd.Process.Pid {
		t.Fatalf("the provider (pid %d) is switchyard's own child, not OpenTofu's", provider)
	}
	if err := syscall.Kill(tofu, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for alive(provider) {
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("the provider (pid %d) outlived its OpenTofu (pid %d) by 5 s", provider, tofu)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the provider ended %s after OpenTofu", time.Since(killed).Round(time.Millisecond))
	<-run.done

	r := switchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if v := verdicts(t, r)["web1"]; v == nil || v["ok"] != true {
		t.Errorf("the rerun's verdict %v, want ok\n%s", v, strings.Join(logMsgs(r), "\n"))
	}
	noStaleLock(t, node)
	noSwitchUnitLeft(t, node)
}

// alive says whether a process runs: it exists and is no zombie (a zombie has
// exited and waits for its parent to reap it).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	f, err := procStat(pid)
	return err == nil && len(f) > 0 && f[0] != "Z"
}

// parentOf is a process's parent pid.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	f, err := procStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %v", pid, f)
	}
	return ppid
}

// procStat is /proc/<pid>/stat after the command name: state, ppid, ... (the
// name may hold spaces, so the fields start after its last ')').
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 2 {
		return nil, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	return f, nil
}
