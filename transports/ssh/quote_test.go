package ssh

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":           `''`,
		"plain":      `'plain'`,
		"a b":        `'a b'`,
		"it's":       `'it'\''s'`,
		"'":          `''\'''`,
		"$HOME;rm":   `'$HOME;rm'`,
		"a\nb":       "'a\nb'",
		`back\slash`: `'back\slash'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	cases := []struct {
		argv, path []string
		sudo, wide bool
		want       string
	}{
		{[]string{"true"}, nil, false, false, `exec 'true'`},
		{[]string{"printf", "%s\n", "a b"}, nil, false, false, "exec 'printf' '%s\n' 'a b'"},
		{[]string{"hello"}, []string{"/nix/store/x-sys/sw/bin"}, false, false,
			`PATH="${PATH:+$PATH:}"'/nix/store/x-sys/sw/bin'; export PATH; exec 'hello'`},
		{[]string{"hello", "it's"}, []string{"/a", "/b c"}, false, false,
			`PATH="${PATH:+$PATH:}"'/a':'/b c'; export PATH; exec 'hello' 'it'\''s'`},
		{[]string{"systemctl", "is-system-running"}, nil, true, false, `exec sudo -n 'systemctl' 'is-system-running'`},
		{[]string{"hello"}, []string{"/t/sw/bin"}, true, false,
			`PATH="${PATH:+$PATH:}"'/t/sw/bin'; export PATH; exec sudo -n env PATH="$PATH" 'hello'`},
		{[]string{"nix-store", "--serve", "--write"}, nil, false, true,
			wideStdin + `exec 'nix-store' '--serve' '--write'`},
		{[]string{"nix-store", "--serve", "--write"}, []string{"/t/sw/bin"}, true, true,
			`PATH="${PATH:+$PATH:}"'/t/sw/bin'; export PATH; ` + wideStdin + `exec sudo -n env PATH="$PATH" 'nix-store' '--serve' '--write'`},
	}
	for _, c := range cases {
		c.want = `printf 'switchyard-pid %d\n' "$$" >&2; ` + c.want
		if got := commandLine(c.argv, c.path, c.sudo, c.wide); got != c.want {
			t.Errorf("commandLine(%q, %q, %v, %v)\n got %s\nwant %s", c.argv, c.path, c.sudo, c.wide, got, c.want)
		}
	}
}

func TestKillLine(t *testing.T) {
	if got, want := killLine(4242, "TERM", false), `kill -TERM -4242`; got != want {
		t.Errorf("killLine as root = %s, want %s", got, want)
	}
	if got, want := killLine(4242, "KILL", true), `exec sudo -n 'kill' '-KILL' '--' '-4242'`; got != want {
		t.Errorf("killLine under sudo = %s, want %s", got, want)
	}
}

// TestCommandLineRoundTrip runs command lines through the local POSIX shell, as
// sshd runs them through the login shell: every argument arrives verbatim.
func TestCommandLineRoundTrip(t *testing.T) {
	args := []string{"", "a b", "it's", `"double"`, "$HOME", "`id`", "a;b", "a&&b|c", "*", "~", "new\nline", `back\slash`, "'", "''", "-n", "%s"}
	line := commandLine(append([]string{"printf", `[%s]\n`}, args...), nil, false, false)
	c := exec.Command("/bin/sh", "-c", line)
	var errOut strings.Builder
	c.Stderr = &errOut
	out, err := c.Output()
	if err != nil {
		t.Fatalf("sh -c %s: %v", line, err)
	}
	// The pid report names the shell, which exec made the command.
	if want := fmt.Sprintf("switchyard-pid %d\n", c.Process.Pid); errOut.String() != want {
		t.Errorf("stderr %q, want the pid report %q", errOut.String(), want)
	}
	var want strings.Builder
	for _, a := range args {
		want.WriteString("[" + a + "]\n")
	}
	if string(out) != want.String() {
		t.Errorf("got %q\nwant %q", out, want.String())
	}

	dir := filepath.Join(t.TempDir(), "sw bin's $dir")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "switchyard-only-here"), []byte("#!/bin/sh\necho found \"$PATH\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	line = commandLine([]string{"switchyard-only-here"}, []string{dir}, false, false)
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %s: %v", line, err)
	}
	if got, want := string(out), "found /usr/bin:/bin:"+dir+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// An empty PATH: the directory alone, not an empty element (the working directory).
	cmd = exec.Command("/bin/sh", "-c", line)
	cmd.Env = []string{"PATH="}
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %s (no PATH): %v", line, err)
	}
	if got, want := string(out), "found "+dir+"\n"; got != want {
		t.Errorf("no PATH: got %q, want %q", got, want)
	}
}

// TestWideStdinLine runs a wide command line through the local POSIX shell with
// its stdin a pipe: with perl on PATH the command finds a 1 MiB pipe (perl asks
// F_GETPIPE_SZ, 1032), without it the command runs all the same and reads its
// stdin whole.
func TestWideStdinLine(t *testing.T) {
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Skip("no perl on this machine")
	}
	run := func(argv []string, env []string) string {
		t.Helper()
		line := commandLine(argv, nil, false, true)
		cmd := exec.Command("/bin/sh", "-c", line)
		cmd.Env = env
		w, err := cmd.StdinPipe() // a pipe, as sshd gives
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = w.Write([]byte("data on stdin"))
			_ = w.Close()
		}()
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sh -c %s: %v", line, err)
		}
		return string(out)
	}
	if got := run([]string{perl, "-e", "print fcntl(STDIN, 1032, 0)"}, []string{"PATH=" + filepath.Dir(perl)}); got != "1048576" {
		t.Errorf("pipe size with perl on PATH: %q, want 1048576", got)
	}
	// The same without the prelude: the kernel's default, so the check above can fail.
	cmd := exec.Command("/bin/sh", "-c", commandLine([]string{perl, "-e", "print fcntl(STDIN, 1032, 0)"}, nil, false, false))
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.Output(); err != nil || string(out) != "65536" {
		t.Errorf("pipe size without wide: %q, %v; want 65536", out, err)
	}

	dir := t.TempDir()
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cat, filepath.Join(dir, "cat")); err != nil {
		t.Fatal(err)
	}
	if got := run([]string{"cat"}, []string{"PATH=" + dir}); got != "data on stdin" {
		t.Errorf("without perl on PATH: %q, want the stdin back", got)
	}
}

func TestCheckArgv0(t *testing.T) {
	if err := checkArgv0(nil, false); err == nil {
		t.Error("empty argv accepted")
	}
	if err := checkArgv0([]string{"-c"}, false); err == nil {
		t.Error("argv0 starting with '-' accepted")
	}
	if err := checkArgv0([]string{"A=b"}, true); err == nil {
		t.Error("argv0 with '=' accepted under sudo env")
	}
	if err := checkArgv0([]string{"A=b"}, false); err != nil {
		t.Errorf("argv0 with '=' refused without env: %v", err)
	}
}
