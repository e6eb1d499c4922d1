package effects

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseHolder(t *testing.T) {
	for _, c := range []struct {
		line string
		want *lockHolder
		bad  bool
	}{
		{line: "", want: nil},
		{line: "  \n", want: nil},
		{line: "7 1700000120 ci-runner-3 4242 1700000000\n", want: &lockHolder{Token: 7, Expires: 1700000120, Host: "ci-runner-3", PID: 4242, Since: 1700000000, Where: "-"}},
		{line: "7 1700000120 host 4242", bad: true},
		{line: "x 1700000120 host 4242 1700000000", bad: true},
		{line: "7 soon host 4242 1700000000", bad: true},
		{line: "7 1700000120 host pid 1700000000", bad: true},
		{line: "7 1700000120 host 1 2 boot/pid 3", bad: true},
		{line: "7 1700000120 host 4242 1700000000 b1/pid:_4_", want: &lockHolder{Token: 7, Expires: 1700000120, Host: "host", PID: 4242, Since: 1700000000, Where: "b1/pid:_4_"}},
	} {
		got, err := parseHolder(c.line)
		if (err != nil) != c.bad {
			t.Errorf("parseHolder(%q) err = %v, want error %v", c.line, err, c.bad)
			continue
		}
		if !c.bad && !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseHolder(%q) = %+v, want %+v", c.line, got, c.want)
		}
	}
}

func TestParseLockState(t *testing.T) {
	out := "now 100\ngeneration 7\nlock 7 160 ops-laptop 99 40\n" +
		"switch switchyard-switch-1.service activating start\n" +
		"switch switchyard-switch-2.service active exited\n" +
		"switch switchyard-switch-3.service failed failed\n"
	st, err := parseLockState(out)
	if err != nil {
		t.Fatal(err)
	}
	want := lockState{Now: 100, Generation: 7, Line: "7 160 ops-laptop 99 40",
		Holder:  &lockHolder{Token: 7, Expires: 160, Host: "ops-laptop", PID: 99, Since: 40, Where: "-"},
		Running: []string{"switchyard-switch-1.service"}}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("got %+v\nwant %+v", st, want)
	}
	free, err := parseLockState("now 5\ngeneration 0\nlock \n")
	if err != nil || free.Holder != nil || free.Line != "" || free.Now != 5 {
		t.Errorf("no lock: %+v %v", free, err)
	}
	for _, bad := range []string{"", "generation 1\nlock \n", "now x\nlock \n", "now 1\nlock 1 2 3\n"} {
		if _, err := parseLockState(bad); err == nil {
			t.Errorf("parseLockState(%q) accepted", bad)
		}
	}
}

func TestDecideLock(t *testing.T) {
	me := deployer{Host: "laptop", PID: 42, Where: "boot1/pid:_1_"}
	other := &lockHolder{Token: 3, Expires: 200, Host: "ci-2", PID: 10, Since: 80, Where: "boot9/pid:_1_"}
	mine := &lockHolder{Token: 3, Expires: 200, Host: "laptop", PID: 42, Since: 80, Where: me.Where}
	sibling := func(pid int) *lockHolder { // another process of this machine
		return &lockHolder{Token: 3, Expires: 200, Host: "laptop", PID: pid, Since: 80, Where: me.Where}
	}
	unknownWhere := &lockHolder{Token: 3, Expires: 200, Host: "laptop", PID: 77, Since: 80, Where: "-"}
	running := []string{"switchyard-switch-1.service"}
	alive := func(pid int) bool { return pid == 76 || pid == 42 } // 77 is gone
	for _, c := range []struct {
		name string
		st   lockState
		want lockDecision
	}{
		{"free", lockState{Now: 100}, lockFree},
		{"held by another machine", lockState{Now: 100, Holder: other}, lockHeld},
		{"held until the last second", lockState{Now: 199, Holder: other}, lockHeld},
		{"expired at its end", lockState{Now: 200, Holder: other}, lockExpired},
		{"expired long ago", lockState{Now: 9000, Holder: other}, lockExpired},
		{"another machine's pid is never judged", lockState{Now: 100, Holder: &lockHolder{Expires: 200, Host: "ci-2", PID: 77, Where: "boot9/pid:_1_"}}, lockHeld},
		{"mine", lockState{Now: 100, Holder: mine}, lockMine},
		{"mine but expired", lockState{Now: 300, Holder: mine}, lockExpired},
		{"a live process of this machine", lockState{Now: 100, Holder: sibling(76)}, lockHeld},
		{"a gone process of this machine", lockState{Now: 100, Holder: sibling(77)}, lockAbandoned},
		{"a gone process, its place unknown", lockState{Now: 100, Holder: unknownWhere}, lockHeld},
		{"gone, but its switch still runs", lockState{Now: 100, Holder: sibling(77), Running: running}, lockSwitching},
		{"expired but its switch still runs", lockState{Now: 300, Holder: other, Running: running}, lockSwitching},
		{"no lock but a switch runs", lockState{Now: 100, Running: running}, lockSwitching},
		{"a live holder with its switch running", lockState{Now: 100, Holder: other, Running: running}, lockHeld},
	} {
		if got := decideLock(c.st, me, alive); got != c.want {
			t.Errorf("%s: decideLock = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestProcessAlive(t *testing.T) {
	if !processAlive(os.Getpid()) {
		t.Error("this process reads as gone")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	if processAlive(cmd.Process.Pid) {
		t.Errorf("the ended process %d reads as alive", cmd.Process.Pid)
	}
	if processAlive(0) || processAlive(-1) {
		t.Error("pid 0 or -1 reads as alive")
	}
}

func TestFenceArgv(t *testing.T) {
	argv := []string{"nix-env", "-p", "/nix/var/nix/profiles/system", "--set", "/nix/store/x; rm -rf /"}
	if got := FenceArgv(context.Background(), argv); !reflect.DeepEqual(got, argv) {
		t.Errorf("unfenced ctx changed argv: %q", got)
	}
	for _, c := range []struct {
		ttl   time.Duration
		lease string
	}{{0, "0"}, {90 * time.Second, "91"}, {300 * time.Millisecond, "2"}} {
		got := FenceArgv(WithFence(context.Background(), 12, c.ttl), argv)
		want := append([]string{"sh", "-c", LockScript, "sh", "fence", "12", c.lease}, argv...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("fenced argv with a TTL of %v = %q", c.ttl, got)
		}
	}
	// The script is constant: inputs only ever arrive as arguments.
	if strings.Contains(LockScript, "/nix/store") {
		t.Error("LockScript holds input")
	}
}

func TestLockHolderNamesHostPidStart(t *testing.T) {
	s := lockHolder{Token: 9, Expires: 1700000120, Host: "ci-runner-3", PID: 4242, Since: 1700000000}.String()
	for _, w := range []string{"host ci-runner-3", "pid 4242", "since 2023-11-14T22:13:20Z", "token 9"} {
		if !strings.Contains(s, w) {
			t.Errorf("%q lacks %q", s, w)
		}
	}
}

// TestProcessAliveZombie: a child that exited and is not reaped yet is no holder.
func TestProcessAliveZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); !zombie(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d never became a zombie", pid)
		}
	}
	if processAlive(pid) {
		t.Errorf("processAlive(%d) of a zombie = true", pid)
	}
	if !processAlive(os.Getpid()) {
		t.Errorf("processAlive of this process = false")
	}
}
