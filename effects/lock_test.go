package effects

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func TestParseHolder(t *testing.T) {
	for _, c := range []struct {
		line string
		want *lockHolder
		bad  bool
	}{
		{line: "", want: nil},
		{line: "  \n", want: nil},
		{line: "7 1700000120 ci-runner-3 4242 1700000000\n", want: &lockHolder{Token: 7, Expires: 1700000120, Host: "ci-runner-3", PID: 4242, Since: 1700000000}},
		{line: "7 1700000120 host 4242", bad: true},
		{line: "x 1700000120 host 4242 1700000000", bad: true},
		{line: "7 soon host 4242 1700000000", bad: true},
		{line: "7 1700000120 host pid 1700000000", bad: true},
		{line: "7 1700000120 host 1 2 3", bad: true},
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
		Holder:  &lockHolder{Token: 7, Expires: 160, Host: "ops-laptop", PID: 99, Since: 40},
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
	other := &lockHolder{Token: 3, Expires: 200, Host: "ci-2", PID: 10, Since: 80}
	me := &lockHolder{Token: 3, Expires: 200, Host: "laptop", PID: 42, Since: 80}
	for _, c := range []struct {
		name string
		st   lockState
		want lockDecision
	}{
		{"free", lockState{Now: 100}, lockFree},
		{"held by another", lockState{Now: 100, Holder: other}, lockHeld},
		{"held until the last second", lockState{Now: 199, Holder: other}, lockHeld},
		{"expired at its end", lockState{Now: 200, Holder: other}, lockExpired},
		{"expired long ago", lockState{Now: 9000, Holder: other}, lockExpired},
		{"mine", lockState{Now: 100, Holder: me}, lockMine},
		{"mine but expired", lockState{Now: 300, Holder: me}, lockExpired},
		{"same host other pid", lockState{Now: 100, Holder: &lockHolder{Expires: 200, Host: "laptop", PID: 43}}, lockHeld},
		{"expired but its switch still runs", lockState{Now: 300, Holder: other, Running: []string{"switchyard-switch-1.service"}}, lockSwitching},
		{"no lock but a switch runs", lockState{Now: 100, Running: []string{"switchyard-switch-1.service"}}, lockSwitching},
	} {
		if got := decideLock(c.st, "laptop", 42); got != c.want {
			t.Errorf("%s: decideLock = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestFenceArgv(t *testing.T) {
	argv := []string{"nix-env", "-p", "/nix/var/nix/profiles/system", "--set", "/nix/store/x; rm -rf /"}
	if got := FenceArgv(context.Background(), argv); !reflect.DeepEqual(got, argv) {
		t.Errorf("unfenced ctx changed argv: %q", got)
	}
	got := FenceArgv(WithFence(context.Background(), 12), argv)
	want := append([]string{"sh", "-c", LockScript, "sh", "fence", "12"}, argv...)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("fenced argv = %q", got)
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
