// Package transporttest is the conformance suite every effects.Transport runs against a test-bed node.
package transporttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
)

// NewFunc makes the transport under test for node. It may register its own
// cleanup (a Close); the suite closes the transport itself as its last subtest,
// so Close must be safe to call again.
type NewFunc func(t *testing.T, node *testbed.Node) effects.Transport

// Skips names subtests (by their t.Run name, e.g. "run/cancel") a transport is
// known to fail, each with the reason; they are skipped with that reason instead
// of failing. An entry is a recorded gap, never a relaxed contract.
type Skips map[string]string

// Run launches one test-bed node, makes a transport to it with newTransport and
// runs the contracts of effects.Transport and SPEC 5 as subtests sharing that node.
func Run(t *testing.T, newTransport NewFunc) { RunSkipping(t, newTransport, nil) }

// RunSkipping is Run with the subtests in skips skipped.
func RunSkipping(t *testing.T, newTransport NewFunc, skips Skips) {
	bed := testbed.Require(t)
	node := bed.Node(t)
	tr := newTransport(t, node)
	s := &suite{bed: bed, node: node, tr: tr, skips: skips}

	s.run(t, "target", s.target)
	s.run(t, "switch-runtime-max-args", s.switchRuntimeMaxArgs)
	s.run(t, "run/argv-verbatim", s.argvVerbatim)
	s.run(t, "run/exit-status", s.exitStatus)
	s.run(t, "run/stdin-stdout-byte-exact", s.streamsByteExact)
	s.run(t, "run/stderr-separate", s.stderrSeparate)
	s.run(t, "run/nil-stdin-is-empty", s.nilStdin)
	s.run(t, "run/nil-stdout-stderr-discarded", s.nilOutputs)
	s.run(t, "run/path-appended", s.pathAppended)
	s.run(t, "run/cancel", s.cancel)
	s.run(t, "run/cancelled-before-start", s.cancelledBefore)
	s.run(t, "run/after-cancel", s.afterCancel)
	s.run(t, "run/fenced", s.fencedRun)
	s.run(t, "copy-closure", s.copyClosure)
	s.run(t, "copy-closure/again-sends-nothing", s.copyAgain)
	s.run(t, "finalize-bootloader", s.finalize)
	s.run(t, "revert-bootloader", s.revert)
	s.run(t, "bootloader/fenced", s.fencedBootloader)
	s.run(t, "close-twice", s.closeTwice)
}

type suite struct {
	bed   *testbed.Bed
	node  *testbed.Node
	tr    effects.Transport
	skips Skips

	top    string // the closure copied by copy-closure; "" when that failed
	copied bool
}

func (s *suite) run(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		if why, ok := s.skips[name]; ok {
			t.Skipf("known gap of %s: %s", s.tr.Target(), why)
		}
		f(t)
	})
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// result is one finished Run.
type result struct {
	code           int
	stdout, stderr string
}

// mustRun runs cmd with stdout and stderr captured (when cmd leaves them nil)
// and fails the test on a transport error.
func (s *suite) mustRun(t *testing.T, cmd effects.Command) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	code, err := s.tr.Run(timeout(t, 2*time.Minute), cmd)
	if err != nil {
		t.Fatalf("Run %q: %v (stderr %q)", cmd.Argv, err, stderr.String())
	}
	return result{code, stdout.String(), stderr.String()}
}

// exists tells whether path exists on the node (asked through Incus, not the
// transport under test).
func (s *suite) exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := s.node.Exec(timeout(t, time.Minute), "test", "-e", path)
	return err == nil
}

// mustRunCtx is mustRun under ctx.
func (s *suite) mustRunCtx(t *testing.T, ctx context.Context, cmd effects.Command) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code, err := s.tr.Run(ctx, cmd)
	if err != nil {
		t.Fatalf("Run %q: %v (stderr %q)", cmd.Argv, err, stderr.String())
	}
	return result{code, stdout.String(), stderr.String()}
}

// Target is non-empty and names the node: its instance name or the port its
// sshd is reached on.
func (s *suite) target(t *testing.T) {
	got := s.tr.Target()
	if strings.TrimSpace(got) == "" {
		t.Fatal("Target is empty")
	}
	if !strings.Contains(got, s.node.Name) && !containsWord(got, strconv.Itoa(s.node.SSHPort)) {
		t.Errorf("Target %q names neither the instance %q nor its ssh port %d", got, s.node.Name, s.node.SSHPort)
	}
}

// containsWord tells whether s holds w not adjacent to other digits.
func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(w)
		if (j == 0 || !isDigit(s[j-1])) && (end == len(s) || !isDigit(s[end])) {
			return true
		}
		i = j + 1
	}
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// SwitchRuntimeMaxArgs are systemd-run options only: the body puts them before the
// command, so anything else would be run as the command. The bound itself is the
// body's (DEPLOY_SWITCH_TIMEOUT).
func (s *suite) switchRuntimeMaxArgs(t *testing.T) {
	args := s.tr.SwitchRuntimeMaxArgs()
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		t.Errorf("SwitchRuntimeMaxArgs = %q: the first is not an option", args)
	}
}

// Argv reaches the program exactly: no shell parses it on the way.
func (s *suite) argvVerbatim(t *testing.T) {
	marker := "/tmp/transporttest-pwned"
	args := []string{"plain", "with space", "  two  spaces  ", "it's", `"double"`, `'single'`, "$HOME", "${PATH}",
		"$(touch " + marker + ")", "`touch " + marker + "`", "; touch " + marker, "&& touch " + marker,
		"| touch " + marker, "> " + marker, "*", "?", "[a]", `back\slash`, "new\nline", "tab\there", "",
		"-n", "--", "a=b", "ü ☃", "#x", "~", "!x", "%s"}
	r := s.mustRun(t, effects.Command{Argv: append([]string{"printf", `%s\0`}, args...)})
	if r.code != 0 {
		t.Fatalf("printf exited %d (stderr %q)", r.code, r.stderr)
	}
	got := strings.Split(strings.TrimSuffix(r.stdout, "\x00"), "\x00")
	if len(got) != len(args) {
		t.Errorf("%d arguments arrived, want %d: %q", len(got), len(args), got)
	}
	for i := range args {
		if i >= len(got) || got[i] != args[i] {
			g := "<missing>"
			if i < len(got) {
				g = strconv.Quote(got[i])
			}
			t.Errorf("argument %d arrived as %s, want %q", i, g, args[i])
		}
	}
	if r := s.mustRun(t, effects.Command{Argv: []string{"test", "-e", marker}}); r.code == 0 {
		t.Error("an argument was run as shell code on the node (" + marker + " exists)")
	}
}

// The command's exit status comes back as Run's exit, with a nil error.
func (s *suite) exitStatus(t *testing.T) {
	for _, want := range []int{0, 1, 3, 100} {
		if r := s.mustRun(t, effects.Command{Argv: []string{"sh", "-c", "exit " + strconv.Itoa(want)}}); r.code != want {
			t.Errorf("sh -c 'exit %d' came back as %d", want, r.code)
		}
	}
	if r := s.mustRun(t, effects.Command{Argv: []string{"true"}}); r.code != 0 {
		t.Errorf("true exited %d", r.code)
	}
	if r := s.mustRun(t, effects.Command{Argv: []string{"false"}}); r.code != 1 {
		t.Errorf("false exited %d", r.code)
	}
}

// Stdin reaches the command and its stdout comes back byte for byte.
func (s *suite) streamsByteExact(t *testing.T) {
	in := make([]byte, 3<<20+12345)
	if _, err := rand.Read(in); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := s.mustRun(t, effects.Command{Argv: []string{"cat"}, Stdin: bytes.NewReader(in), Stdout: &out})
	if r.code != 0 {
		t.Fatalf("cat exited %d (stderr %q)", r.code, r.stderr)
	}
	if !bytes.Equal(out.Bytes(), in) {
		n := 0
		for n < len(in) && n < out.Len() && in[n] == out.Bytes()[n] {
			n++
		}
		t.Fatalf("cat returned %d bytes, want %d; first difference at byte %d", out.Len(), len(in), n)
	}
}

// Stderr is a stream of its own, not mixed into stdout.
func (s *suite) stderrSeparate(t *testing.T) {
	r := s.mustRun(t, effects.Command{Argv: []string{"sh", "-c", "echo out; echo err >&2; echo out2; echo err2 >&2; exit 5"}})
	if r.code != 5 || r.stdout != "out\nout2\n" || r.stderr != "err\nerr2\n" {
		t.Errorf("got exit %d, stdout %q, stderr %q; want 5, %q, %q", r.code, r.stdout, r.stderr, "out\nout2\n", "err\nerr2\n")
	}
}

// A nil Stdin is empty input: a command reading stdin sees end of file at once.
func (s *suite) nilStdin(t *testing.T) {
	done := make(chan result, 1)
	go func() {
		var stdout bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		code, err := s.tr.Run(ctx, effects.Command{Argv: []string{"wc", "-c"}, Stdout: &stdout})
		if err != nil {
			done <- result{code: -1, stderr: err.Error()}
			return
		}
		done <- result{code: code, stdout: stdout.String()}
	}()
	select {
	case r := <-done:
		if r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
			t.Errorf("wc -c with nil Stdin: exit %d, stdout %q, error %q; want 0, \"0\"", r.code, r.stdout, r.stderr)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("wc -c with nil Stdin did not return: stdin was not closed")
	}
}

// Nil Stdout and Stderr discard the output.
func (s *suite) nilOutputs(t *testing.T) {
	code, err := s.tr.Run(timeout(t, time.Minute), effects.Command{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 4"}})
	if err != nil || code != 4 {
		t.Errorf("Run with nil Stdout and Stderr = %d, %v; want 4, nil", code, err)
	}
}

// Command.Path directories are appended to the node's PATH, in order, and a
// program found only there runs.
func (s *suite) pathAppended(t *testing.T) {
	dirA, dirB := "/tmp/transporttest-path-a", "/tmp/transporttest-path-b"
	s.node.MustExec(t, "sh", "-c", "mkdir -p "+dirA+" "+dirB+
		" && printf '#!/bin/sh\\necho only-in-path-b \"$@\"\\n' > "+dirB+"/transporttest-only-here"+
		" && chmod 755 "+dirB+"/transporttest-only-here")

	if r := s.mustRun(t, effects.Command{Argv: []string{"transporttest-only-here"}}); r.code == 0 {
		t.Fatalf("transporttest-only-here ran without Command.Path (stdout %q)", r.stdout)
	}
	r := s.mustRun(t, effects.Command{Argv: []string{"transporttest-only-here", "x y"}, Path: []string{dirA, dirB}})
	if r.code != 0 || r.stdout != "only-in-path-b x y\n" {
		t.Errorf("a program only in a Command.Path directory: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	r = s.mustRun(t, effects.Command{Argv: []string{"printenv", "PATH"}, Path: []string{dirA, dirB}})
	path := strings.TrimSuffix(r.stdout, "\n")
	if r.code != 0 || !strings.HasSuffix(path, ":"+dirA+":"+dirB) {
		t.Errorf("printenv PATH = %q (exit %d), want it to end with :%s:%s", path, r.code, dirA, dirB)
	}
	// The node's own PATH is kept in front.
	own := s.mustRun(t, effects.Command{Argv: []string{"printenv", "PATH"}})
	ownPath := strings.TrimSuffix(own.stdout, "\n")
	if own.code != 0 || ownPath == "" {
		t.Fatalf("printenv PATH without Command.Path: exit %d, %q", own.code, ownPath)
	}
	if path != ownPath+":"+dirA+":"+dirB {
		t.Errorf("PATH with Command.Path = %q, want the node's own %q followed by the directories", path, ownPath)
	}
}

// A cancelled ctx makes a running Run return promptly with an error, and the
// command ends on the node, children included (issue 15 item 3): the command is
// a shell with a sleep in the background and one in the foreground, so a
// transport that only signals the process it started leaves a sleep behind.
func (s *suite) cancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type ret struct {
		code int
		err  error
	}
	done := make(chan ret, 1)
	started := time.Now()
	go func() {
		code, err := s.tr.Run(ctx, effects.Command{Argv: []string{"sh", "-c",
			"sleep " + cancelSleep + " & sleep " + cancelSleep + "; wait", "transporttest-cancel"}})
		done <- ret{code, err}
	}()
	// The command runs on the node, both sleeps started, before the cancel.
	for deadline := time.Now().Add(30 * time.Second); len(s.leftovers(t)) < 3; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start on the node within 30 s (processes %v)", s.leftovers(t))
		}
	}
	time.Sleep(300 * time.Millisecond)
	cancelled := time.Now()
	cancel()
	select {
	case r := <-done:
		if r.err == nil {
			t.Errorf("Run of the command returned %d, nil after the cancel (after %v); want an error", r.code, time.Since(started).Round(time.Millisecond))
		} else {
			t.Logf("Run returned %v after %v (errors.Is context.Canceled: %v)", r.err, time.Since(cancelled).Round(time.Millisecond), errors.Is(r.err, context.Canceled))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run of the command did not return within 15 s of the cancel")
	}
	for deadline := time.Now().Add(6 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		procs := s.leftovers(t)
		if len(procs) == 0 {
			t.Logf("the cancelled command ended on the node within %v of the cancel", time.Since(cancelled).Round(100*time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("the cancelled command still runs on the node %v after the cancel: %v",
				time.Since(cancelled).Round(100*time.Millisecond), procs)
			pids := make([]string, 0, len(procs))
			for _, p := range procs {
				pids = append(pids, strings.Fields(p)[0])
			}
			_, _ = s.node.Exec(timeout(t, time.Minute), append([]string{"kill", "-9"}, pids...)...)
			return
		}
	}
}

// cancelSleep is the argument of the sleeps the cancel test interrupts, so
// that the command's processes can be found on the node.
const cancelSleep = "117.25"

// leftovers are the node's processes of the cancel test's command ("pid
// cmdline" each): every process whose command line holds cancelSleep, listed
// through the test bed, not the transport under test.
func (s *suite) leftovers(t *testing.T) []string {
	out, err := s.node.Exec(timeout(t, time.Minute), "sh", "-c",
		`for f in /proc/[0-9]*/cmdline; do printf '%s ' "${f%/cmdline}"; tr '\0' ' ' < "$f"; echo; done 2>/dev/null; true`)
	if err != nil {
		t.Fatalf("list the node's processes: %v", err)
	}
	var procs []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(line, cancelSleep) {
			procs = append(procs, strings.TrimPrefix(strings.Join(f, " "), "/proc/"))
		}
	}
	return procs
}

// A ctx cancelled before Run starts fails at once.
func (s *suite) cancelledBefore(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.tr.Run(ctx, effects.Command{Argv: []string{"sleep", "120"}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Run with a cancelled ctx returned no error")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run with a cancelled ctx did not return within 15 s")
	}
}

// After a cancelled Run the transport still runs commands.
func (s *suite) afterCancel(t *testing.T) {
	if r := s.mustRun(t, effects.Command{Argv: []string{"echo", "still here"}}); r.code != 0 || r.stdout != "still here\n" {
		t.Errorf("Run after a cancel: exit %d, stdout %q", r.code, r.stdout)
	}
}

// valid tells whether path is a valid store path on the node, asked through
// Incus, not the transport under test.
func (s *suite) valid(t *testing.T, paths ...string) bool {
	ctx := timeout(t, 2*time.Minute)
	_, err := s.node.Exec(ctx, append([]string{"nix-store", "--check-validity"}, paths...)...)
	return err == nil
}

// closure is the closure of path on this machine.
func closure(t *testing.T, path string) []string {
	out, err := execLocal(timeout(t, time.Minute), "nix-store", "-qR", path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(out)
}

// CopyClosure makes a closure the node lacks valid there, contents intact.
func (s *suite) copyClosure(t *testing.T) {
	top := s.bed.Build(t, "healthy", "transporttest")
	paths := closure(t, top)
	if s.valid(t, top) {
		t.Fatalf("%s is valid on a fresh node already; the test closure must be new to it", top)
	}
	if err := s.tr.CopyClosure(timeout(t, 5*time.Minute), []string{top}); err != nil {
		t.Fatalf("CopyClosure: %v", err)
	}
	s.top = top
	if !s.valid(t, paths...) {
		t.Fatalf("the closure of %s (%d paths) is not valid on the node after CopyClosure", top, len(paths))
	}
	if out, err := s.node.Exec(timeout(t, 2*time.Minute), append([]string{"nix-store", "--verify-path"}, paths...)...); err != nil {
		t.Fatalf("nix-store --verify-path on the node: %v %s", err, out)
	}
	if r := s.mustRun(t, effects.Command{Argv: []string{"nix-store", "--check-validity", top}}); r.code != 0 {
		t.Errorf("nix-store --check-validity %s through the transport exited %d", top, r.code)
	}
	if cc, ok := s.tr.(effects.CopyCounter); ok {
		n, missing, sent, bytes := cc.CopyCounts()
		t.Logf("first copy: %d paths, %d missing, %d sent, %d bytes", n, missing, sent, bytes)
		if n != len(paths) || missing == 0 || sent != missing || bytes <= 0 {
			t.Errorf("CopyCounts after the first copy = %d paths, %d missing, %d sent, %d bytes; want %d paths, missing > 0, sent = missing, bytes > 0",
				n, missing, sent, bytes, len(paths))
		}
	}
	s.copied = true
}

// A second CopyClosure of a closure the node holds succeeds and sends nothing.
func (s *suite) copyAgain(t *testing.T) {
	if !s.copied {
		t.Skip("copy-closure failed")
	}
	if err := s.tr.CopyClosure(timeout(t, 5*time.Minute), []string{s.top}); err != nil {
		t.Fatalf("second CopyClosure: %v", err)
	}
	if cc, ok := s.tr.(effects.CopyCounter); ok {
		n, missing, sent, bytes := cc.CopyCounts()
		t.Logf("second copy: %d paths, %d missing, %d sent, %d bytes", n, missing, sent, bytes)
		if missing != 0 || sent != 0 {
			t.Errorf("CopyCounts after the second copy = %d paths, %d missing, %d sent; want 0 missing, 0 sent", n, missing, sent)
		}
	} else {
		t.Log("the transport does not implement effects.CopyCounter")
	}
	if !s.valid(t, s.top) {
		t.Errorf("%s is not valid on the node after the second copy", s.top)
	}
}

const (
	systemProfile = "/nix/var/nix/profiles/system"
	bootEntry     = "/boot/switchyard-default" // the test closures' boot-entry marker
)

// FinalizeBootloader points the system profile at the toplevel.
func (s *suite) finalize(t *testing.T) {
	if !s.copied {
		t.Skip("copy-closure failed")
	}
	if err := s.tr.FinalizeBootloader(timeout(t, 3*time.Minute), s.top); err != nil {
		t.Fatalf("FinalizeBootloader: %v", err)
	}
	if got := s.node.Readlink(t, systemProfile); got != s.top {
		t.Errorf("%s resolves to %q, want %q", systemProfile, got, s.top)
	}
	if got := s.node.Readlink(t, bootEntry); got != "" && got != s.top {
		t.Errorf("boot entry %s = %q after FinalizeBootloader, want %q (or none, for a container)", bootEntry, got, s.top)
	}
}

// RevertBootloader, on a node running a generation, succeeds; a boot entry that
// FinalizeBootloader moved to another toplevel points at the running one again.
func (s *suite) revert(t *testing.T) {
	if !s.copied {
		t.Skip("copy-closure failed")
	}
	next := s.bed.Build(t, "healthy", "transporttest-next")
	if err := s.tr.CopyClosure(timeout(t, 5*time.Minute), []string{next}); err != nil {
		t.Fatalf("CopyClosure of a second generation: %v", err)
	}
	// The running generation is s.top.
	s.node.MustExec(t, "ln", "-sfn", s.top, "/run/current-system")
	t.Cleanup(func() { s.node.MustExec(t, "rm", "-f", "/run/current-system") })
	if err := s.tr.FinalizeBootloader(timeout(t, 3*time.Minute), next); err != nil {
		t.Fatalf("FinalizeBootloader of the second generation: %v", err)
	}
	if got := s.node.Readlink(t, systemProfile); got != next {
		t.Errorf("%s resolves to %q after the second FinalizeBootloader, want %q", systemProfile, got, next)
	}
	entry := s.node.Readlink(t, bootEntry)
	if err := s.tr.RevertBootloader(timeout(t, 3*time.Minute)); err != nil {
		t.Fatalf("RevertBootloader: %v", err)
	}
	switch got := s.node.Readlink(t, bootEntry); {
	case entry == "":
		t.Logf("no boot entry installed (a container): RevertBootloader only has to succeed; boot entry now %q", got)
	case got != s.top:
		t.Errorf("boot entry %s = %q after RevertBootloader, want the running generation %q (was %q)", bootEntry, got, s.top, entry)
	}
}

// lock runs one verb of the node's deploy lock (effects.LockScript) and returns
// its exit status and stdout.
func (s *suite) lock(t *testing.T, args ...string) (int, string) {
	t.Helper()
	r := s.mustRun(t, effects.Command{Argv: append([]string{"sh", "-c", effects.LockScript, "sh"}, args...)})
	return r.code, r.stdout
}

// takeLock takes the node's deploy lock and returns its token; the test releases it.
func (s *suite) takeLock(t *testing.T) uint64 {
	t.Helper()
	code, out := s.lock(t, "read")
	if code != 0 {
		t.Fatalf("lock read exited %d: %q", code, out)
	}
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "lock "); ok {
			line = v
		}
	}
	code, out = s.lock(t, "take", line, "transporttest", "1", "60", "-")
	if code != 0 {
		t.Fatalf("lock take exited %d: %q", code, out)
	}
	token, err := strconv.ParseUint(strings.Fields(out)[0], 10, 64)
	if err != nil {
		t.Fatalf("lock take printed %q: %v", out, err)
	}
	t.Cleanup(func() { s.lock(t, "release", strconv.FormatUint(token, 10)) })
	return token
}

// Under a fence (effects.WithFence) Run runs the command only while the token is
// the node's current deploy lock, checked on the node in the same command, and
// renews the lease, printing nothing of its own: a stale token is refused with
// effects.LockFenced and the lock-lost marker, and the command does not run.
func (s *suite) fencedRun(t *testing.T) {
	token := s.takeLock(t) // a lease of 60 s
	ok, stale := "/tmp/transporttest-fenced-ok", "/tmp/transporttest-fenced-stale"
	s.node.MustExec(t, "rm", "-f", ok, stale)
	r := s.mustRunCtx(t, effects.WithFence(timeout(t, time.Minute), token, time.Hour), effects.Command{Argv: []string{"touch", ok}})
	if r.code != 0 || !s.exists(t, ok) || r.stdout != "" {
		t.Errorf("fenced touch with the current token: exit %d stdout %q stderr %q, file made %v", r.code, r.stdout, r.stderr, s.exists(t, ok))
	}
	lease := strings.Fields(s.node.MustExec(t, "sh", "-c", `echo "$(date +%s) $(cat /run/switchyard/lock)"`))
	if len(lease) < 3 || lease[1] != strconv.FormatUint(token, 10) || !longerThan(lease[2], lease[0], 3000) {
		t.Errorf("after a fenced command with a lease of an hour the node's clock and lock read %q", lease)
	}
	r = s.mustRunCtx(t, effects.WithFence(timeout(t, time.Minute), token+1000, time.Hour), effects.Command{Argv: []string{"touch", stale}})
	if r.code != effects.LockFenced || !strings.Contains(r.stderr, effects.LockLostMarker) {
		t.Errorf("fenced touch with a stale token: exit %d stderr %q, want %d and %q", r.code, r.stderr, effects.LockFenced, effects.LockLostMarker)
	}
	if s.exists(t, stale) {
		t.Errorf("a command fenced by a stale token ran")
	}
}

// Under a stale fence FinalizeBootloader and RevertBootloader fail and change
// neither the system profile nor the boot entry.
func (s *suite) fencedBootloader(t *testing.T) {
	if !s.copied {
		t.Skip("copy-closure failed")
	}
	token := s.takeLock(t)
	profile, entry := s.node.Readlink(t, systemProfile), s.node.Readlink(t, bootEntry)
	ctx := effects.WithFence(timeout(t, 3*time.Minute), token+1000, 0)
	next := s.bed.Build(t, "healthy", "transporttest-fenced")
	if err := s.tr.CopyClosure(timeout(t, 5*time.Minute), []string{next}); err != nil {
		t.Fatalf("CopyClosure: %v", err)
	}
	if err := s.tr.FinalizeBootloader(ctx, next); err == nil {
		t.Errorf("FinalizeBootloader under a stale fence succeeded")
	}
	if err := s.tr.RevertBootloader(ctx); err == nil {
		t.Errorf("RevertBootloader under a stale fence succeeded")
	}
	if got := s.node.Readlink(t, systemProfile); got != profile {
		t.Errorf("%s moved under a stale fence: %q, was %q", systemProfile, got, profile)
	}
	if got := s.node.Readlink(t, bootEntry); got != entry {
		t.Errorf("boot entry moved under a stale fence: %q, was %q", got, entry)
	}
	// The current token lets them act.
	if err := s.tr.FinalizeBootloader(effects.WithFence(timeout(t, 3*time.Minute), token, 0), next); err != nil {
		t.Errorf("FinalizeBootloader under the current fence: %v", err)
	} else if got := s.node.Readlink(t, systemProfile); got != next {
		t.Errorf("%s = %q after a fenced FinalizeBootloader, want %q", systemProfile, got, next)
	}
}

// longerThan tells whether the Unix time expires is more than seconds after now.
func longerThan(expires, now string, seconds int64) bool {
	e, err1 := strconv.ParseInt(expires, 10, 64)
	n, err2 := strconv.ParseInt(now, 10, 64)
	return err1 == nil && err2 == nil && e-n > seconds
}

// Close releases the transport; a second Close does not panic.
func (s *suite) closeTwice(t *testing.T) {
	if err := s.tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("second Close panicked: %v", p)
			}
		}()
		if err := s.tr.Close(); err != nil {
			t.Logf("second Close: %v", err)
		}
	}()
}

// execLocal runs a program on this machine and returns its stdout.
func execLocal(ctx context.Context, name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}
