package shell

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/effects"
)

// weirdArgs are arguments a shell would mangle if they were ever interpolated.
var weirdArgs = []string{
	"plain", "with space", "it's", `"double"`, "$HOME", "${PATH}", "$(touch /tmp/sy-pwned)",
	"`id`", "*", "?", "[a]", `back\slash`, "new\nline", "tab\there", "", "-n", "--", "a=b",
	"ü ☃", ";", "&&", "|", ">", "<", "#comment", "~", "!x", "\x01ctl",
}

func TestHookArgv(t *testing.T) {
	got := hookArgv("bash", "/etc/hooks.sh", "remote_exec", []string{"a b", "$x"})
	want := []string{"bash", "-c", callScript, "bash", "/etc/hooks.sh", "remote_exec", "a b", "$x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("hookArgv (-want +got):\n%s", diff)
	}
	got = hookArgv("/usr/local/bin/bash", "/h", "revert_bootloader", nil)
	want = []string{"/usr/local/bin/bash", "-c", callScript, "bash", "/h", "revert_bootloader"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("hookArgv without arguments (-want +got):\n%s", diff)
	}
	// The script is fixed: arguments never become part of it.
	got = hookArgv("bash", "/h'; rm -rf /", "copy_closure", weirdArgs)
	if got[2] != callScript || !slicesEqual(got[6:], weirdArgs) || got[4] != "/h'; rm -rf /" {
		t.Fatalf("hookArgv mixed input into the script: %q", got)
	}
}

func TestCheckArgv(t *testing.T) {
	got := checkArgv("bash", "/h", Hooks)
	want := append([]string{"bash", "-c", checkScript, "bash", "/h"}, Hooks...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("checkArgv (-want +got):\n%s", diff)
	}
}

func TestHookEnv(t *testing.T) {
	got := hookEnv([]string{"HOME=/root", RemotePathVar + "=/inherited", "A=1"}, []string{"SY_PORT=22", RemotePathVar + "=/extra"})
	want := []string{"HOME=/root", "A=1", "SY_PORT=22"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("hookEnv (-want +got):\n%s", diff)
	}
}

func TestRemotePath(t *testing.T) {
	if got, err := remotePath([]string{"/nix/store/a/sw/bin", "/b"}); err != nil || got != "/nix/store/a/sw/bin:/b" {
		t.Fatalf("remotePath = %q, %v", got, err)
	}
	if got, err := remotePath(nil); err != nil || got != "" {
		t.Fatalf("remotePath(nil) = %q, %v", got, err)
	}
	for _, bad := range []string{"", "/a:/b", "/a\x00"} {
		if _, err := remotePath([]string{bad}); err == nil {
			t.Errorf("remotePath(%q) accepted", bad)
		}
	}
}

func slicesEqual(a, b []string) bool { return cmp.Equal(a, b) }

// local is a transport over testdata/local-hooks.sh, whose "node" is this machine.
func local(t *testing.T, env ...string) (*Transport, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	tr, err := New(Config{Hooks: "testdata/local-hooks.sh", Env: append([]string{"SY_OUT=" + out}, env...)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tr, out
}

func readLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func writeHooks(t *testing.T, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "hooks.sh")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestNewRefuses(t *testing.T) {
	abs, _ := filepath.Abs("testdata/ssh-hooks.sh")
	cases := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no file given", Config{}, []string{"no hooks file"}},
		{"missing file", Config{Hooks: filepath.Join(t.TempDir(), "nope.sh")}, []string{"nope.sh", "no such file"}},
		{"directory", Config{Hooks: t.TempDir()}, []string{"is a directory"}},
		{"missing hooks", Config{Hooks: writeHooks(t, "target() { :; }\nremote_exec() { :; }\nrevert_bootloader=1\n")},
			[]string{"does not define copy_closure, switch_runtime_max_args, finalize_bootloader, revert_bootloader"}},
		{"one hook removed", Config{Hooks: writeHooks(t, "source "+strconv.Quote(abs)+"\nunset -f finalize_bootloader\n")},
			[]string{"does not define finalize_bootloader"}},
		{"prologue exits", Config{Hooks: writeHooks(t, "echo 'cannot find my settings' >&2\nexit 4\n")},
			[]string{"did not load", "exited 4", "cannot find my settings"}},
		{"prologue fails under set -e", Config{Hooks: writeHooks(t, "set -e\ntarget() { :; }\nfalse\n")},
			[]string{"did not load", "exited 1"}},
		{"no such shell", Config{Hooks: "testdata/local-hooks.sh", Shell: "/nonexistent/bash"}, []string{"cannot start /nonexistent/bash"}},
		{"bad env", Config{Hooks: "testdata/local-hooks.sh", Env: []string{"SECRET"}}, []string{"environment entry 1 of 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := New(c.cfg)
			if err == nil {
				t.Fatalf("New accepted it: %+v", tr)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q shows an environment entry", err)
			}
		})
	}
}

func TestNewAcceptsTestPrologues(t *testing.T) {
	for _, f := range []string{"testdata/ssh-hooks.sh", "testdata/local-hooks.sh"} {
		if _, err := New(Config{Hooks: f}); err != nil {
			t.Errorf("New(%s): %v", f, err)
		}
	}
}

func TestRunArgvVerbatim(t *testing.T) {
	tr, _ := local(t)
	var stdout bytes.Buffer
	argv := append([]string{"printf", `%s\0`}, weirdArgs...)
	code, err := tr.Run(context.Background(), effects.Command{Argv: argv, Stdout: &stdout})
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	got := strings.Split(strings.TrimSuffix(stdout.String(), "\x00"), "\x00")
	if diff := cmp.Diff(weirdArgs, got); diff != "" {
		t.Fatalf("arguments changed on the way (-want +got):\n%s", diff)
	}
	if _, err := os.Stat("/tmp/sy-pwned"); err == nil {
		t.Fatal("an argument was run as a command")
	}
}

func TestRunStatusAndStreams(t *testing.T) {
	tr, _ := local(t)
	ctx := context.Background()
	for _, want := range []int{0, 1, 7, 254} {
		code, err := tr.Run(ctx, effects.Command{Argv: []string{"sh", "-c", "exit " + strconv.Itoa(want)}})
		if err != nil || code != want {
			t.Errorf("exit %d: Run = %d, %v", want, code, err)
		}
	}
	code, err := tr.Run(ctx, effects.Command{Argv: []string{"sh", "-c", "kill -TERM $$"}})
	if err != nil || code != 128+int(syscall.SIGTERM) {
		t.Errorf("killed by SIGTERM: Run = %d, %v", code, err)
	}

	// The prologue's own output while it is sourced goes to stderr, never stdout.
	in := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	var stdout, stderr bytes.Buffer
	code, err = tr.Run(ctx, effects.Command{Argv: []string{"sh", "-c", "cat; echo done >&2"},
		Stdin: bytes.NewReader(in), Stdout: &stdout, Stderr: &stderr})
	if err != nil || code != 0 || !bytes.Equal(stdout.Bytes(), in) || stderr.String() != "local-hooks: loaded\ndone\n" {
		t.Fatalf("stdin/stdout/stderr: Run = %d, %v; %d bytes out of %d, stderr %q", code, err, stdout.Len(), len(in), stderr.String())
	}

	// A stdin that never ends does not hold back a command that ignores it.
	r, w, _ := os.Pipe()
	defer w.Close()
	defer r.Close()
	start := time.Now()
	if code, err := tr.Run(ctx, effects.Command{Argv: []string{"true"}, Stdin: r}); err != nil || code != 0 {
		t.Fatalf("Run with endless stdin = %d, %v", code, err)
	}
	if time.Since(start) > pipeGrace {
		t.Fatalf("an endless stdin held Run for %s", time.Since(start))
	}
}

func TestRunPath(t *testing.T) {
	t.Setenv(RemotePathVar, "/inherited/must/not/leak")
	tr, _ := local(t)
	dir := t.TempDir()
	script := "#!/bin/sh\necho only here\n"
	if err := os.WriteFile(filepath.Join(dir, "sy-only-here"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	code, err := tr.Run(context.Background(), effects.Command{Argv: []string{"sy-only-here"}, Stdout: &stdout, Path: []string{dir}})
	if err != nil || code != 0 || stdout.String() != "only here\n" {
		t.Fatalf("with Path: Run = %d, %v, %q", code, err, stdout.String())
	}
	code, err = tr.Run(context.Background(), effects.Command{Argv: []string{"sy-only-here"}})
	if err != nil || code != 127 {
		t.Fatalf("without Path: Run = %d, %v; want 127", code, err)
	}
	stdout.Reset()
	code, err = tr.Run(context.Background(), effects.Command{Argv: []string{"sh", "-c", `printf %s "$` + RemotePathVar + `"`}, Stdout: &stdout})
	if err != nil || code != 0 || stdout.String() != "" {
		t.Fatalf("%s without Path = %q (%d, %v), want empty", RemotePathVar, stdout.String(), code, err)
	}
	if _, err := tr.Run(context.Background(), effects.Command{Argv: []string{"true"}, Path: []string{"/a:/b"}}); err == nil {
		t.Fatal("a PATH directory holding ':' was accepted")
	}
}

func TestRunRefusesBadArgv(t *testing.T) {
	tr, _ := local(t)
	for _, argv := range [][]string{nil, {""}, {"echo", "a\x00b"}} {
		if _, err := tr.Run(context.Background(), effects.Command{Argv: argv}); err == nil {
			t.Errorf("Run(%q) accepted", argv)
		}
	}
}

func TestRunExit255IsUnreachable(t *testing.T) {
	tr, _ := local(t)
	var stderr bytes.Buffer
	code, err := tr.Run(context.Background(), effects.Command{
		Argv:   []string{"sh", "-c", "echo 'ssh: connect to host 192.0.2.1 port 22: Connection refused' >&2; exit 255"},
		Stderr: &stderr,
	})
	if !errors.Is(err, effects.ErrUnreachable) || code != -1 {
		t.Fatalf("Run = %d, %v; want ErrUnreachable", code, err)
	}
	for _, w := range []string{"remote_exec", "exited 255", "Connection refused"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if !strings.Contains(stderr.String(), "Connection refused") {
		t.Errorf("the command's stderr did not reach the caller: %q", stderr.String())
	}
}

func TestRunCancel(t *testing.T) {
	old := cancelGrace
	cancelGrace = 500 * time.Millisecond
	defer func() { cancelGrace = old }()
	tr, _ := local(t)
	pids := filepath.Join(t.TempDir(), "pids")

	// SIGINT ends a command that does not ignore it, without waiting for the grace.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	code, err := tr.Run(ctx, effects.Command{Argv: []string{"sleep", "30"}})
	if !errors.Is(err, context.DeadlineExceeded) || code != -1 {
		t.Fatalf("Run = %d, %v; want the deadline", code, err)
	}
	if !strings.Contains(err.Error(), "remote_exec") || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("error %q does not name the hook", err)
	}
	if d := time.Since(start); d > 300*time.Millisecond+cancelGrace {
		t.Errorf("SIGINT took %s", d)
	}

	// A process group that ignores SIGINT is killed after the grace, children too.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	start = time.Now()
	_, err = tr.Run(ctx2, effects.Command{Argv: []string{"sh", "-c",
		`trap '' INT; sleep 30 & echo $! >"$1"; echo $$ >>"$1"; wait`, "sh", pids}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v; want the deadline", err)
	}
	if d := time.Since(start); d < cancelGrace || d > cancelGrace+3*time.Second {
		t.Errorf("killed after %s, want about %s", d, 300*time.Millisecond+cancelGrace)
	}
	for _, p := range readLines(t, pids) {
		pid, _ := strconv.Atoi(p)
		waitGone(t, pid)
	}

	// A cancelled context never starts the hook.
	done, cancel3 := context.WithCancel(context.Background())
	cancel3()
	if _, err := tr.Run(done, effects.Command{Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context = %v", err)
	}
}

// waitGone waits until pid no longer runs (gone, or a zombie waiting for its reaper).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("process %d survived the kill", pid)
}

func TestPrologueBrokenAfterNew(t *testing.T) {
	f := writeHooks(t, "")
	src, err := os.ReadFile("testdata/local-hooks.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, src, 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := New(Config{Hooks: f})
	if err != nil {
		t.Fatal(err)
	}
	// Now the prologue exits 7 while it is sourced: that is not the command's status.
	if err := os.WriteFile(f, []byte("echo 'settings file missing' >&2\nexit 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, err := tr.Run(context.Background(), effects.Command{Argv: []string{"true"}})
	if err == nil || code != -1 {
		t.Fatalf("Run = %d, %v; want an error", code, err)
	}
	for _, w := range []string{"remote_exec", "did not load", "exit 7", "settings file missing"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if err := os.WriteFile(f, []byte("target() { :; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tr.RevertBootloader(context.Background()); err == nil || !strings.Contains(err.Error(), "defines no function revert_bootloader") {
		t.Fatalf("RevertBootloader with the hook gone = %v", err)
	}
}

func TestTarget(t *testing.T) {
	count := filepath.Join(t.TempDir(), "count")
	tr, _ := local(t, "SY_NAME=web 1", "SY_COUNT="+count)
	for range 3 {
		if got := tr.Target(); got != "local web 1" {
			t.Fatalf("Target = %q", got)
		}
	}
	if n := len(readLines(t, count)); n != 1 {
		t.Fatalf("target ran %d times, want once (cached)", n)
	}
	broken, err := New(Config{Hooks: writeHooks(t, "target() { return 1; }\nremote_exec() { :; }\ncopy_closure() { :; }\n"+
		"switch_runtime_max_args() { :; }\nfinalize_bootloader() { :; }\nrevert_bootloader() { :; }\n")})
	if err != nil {
		t.Fatal(err)
	}
	if got := broken.Target(); got != "shell hooks.sh" {
		t.Fatalf("Target of a failing hook = %q", got)
	}
}

func TestSwitchRuntimeMaxArgs(t *testing.T) {
	tr, _ := local(t)
	want := []string{"--property=RuntimeMaxSec=42", "-p", "CPUQuota=50%"}
	if diff := cmp.Diff(want, tr.SwitchRuntimeMaxArgs()); diff != "" {
		t.Fatalf("SwitchRuntimeMaxArgs (-want +got):\n%s", diff)
	}
	for _, env := range []string{"SY_FAIL=1", "SY_NOT_AN_OPTION=1"} {
		tr, _ := local(t, env)
		if got := tr.SwitchRuntimeMaxArgs(); got != nil {
			t.Errorf("%s: SwitchRuntimeMaxArgs = %q, want none (the body bounds the switch)", env, got)
		}
	}
}

func TestNodeHooks(t *testing.T) {
	ctx := context.Background()
	tr, out := local(t)
	paths := []string{"/nix/store/aaa-one", "/nix/store/bbb-two with space"}
	if err := tr.CopyClosure(ctx, paths); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append([]string{"2"}, paths...), readLines(t, out)); diff != "" {
		t.Errorf("copy_closure arguments (-want +got):\n%s", diff)
	}
	if err := tr.CopyClosure(ctx, []string{"-rf"}); err == nil {
		t.Error("CopyClosure accepted a path that is not one")
	}
	if err := tr.FinalizeBootloader(ctx, "/nix/store/ccc-top"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1", "/nix/store/ccc-top"}, readLines(t, out)); diff != "" {
		t.Errorf("finalize_bootloader arguments (-want +got):\n%s", diff)
	}
	if err := tr.RevertBootloader(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0"}, readLines(t, out)); diff != "" {
		t.Errorf("revert_bootloader arguments (-want +got):\n%s", diff)
	}

	failing, _ := local(t, "SY_FAIL=no space left", "SY_UNREACHABLE=1")
	err := failing.FinalizeBootloader(ctx, "/nix/store/ccc-top")
	if err == nil || errors.Is(err, effects.ErrUnreachable) {
		t.Fatalf("FinalizeBootloader = %v", err)
	}
	if want := "shell transport: finalize_bootloader exited 3: boot entry: no space left"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	err = failing.RevertBootloader(ctx)
	if !errors.Is(err, effects.ErrUnreachable) || !strings.Contains(err.Error(), "revert_bootloader") ||
		!strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("RevertBootloader exiting 255 = %v; want ErrUnreachable naming the hook", err)
	}
}
