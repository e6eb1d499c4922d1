package main_test

import (
	"encoding/json"
	"os"
	"path/filepath"
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
	path := filepath.Join(tree, ".switchyard", "journal", "web1.json")

	run := startSwitchyard(t, env, "tf", "apply", "--tree", tree, "--output", "json")
	var e map[string]any
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &e) == nil && e["phase"] == "switch" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider never journaled a switch; stdout:\n%s", run.stdout.String())
		}
	}
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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// parentOf is a process's parent pid, from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ppid ...: comm may hold spaces, so read after its last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return ppid
}
