package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/node"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// callScript is the fixed script of every hook call:
//
//	bash -c callScript bash <prologue> <hook> <args...>
//
// It sources the prologue (its stdout goes to stderr, so it cannot mix into the
// hook's output), checks the hook is a function, writes one byte to fd 3 to tell
// the hook was reached (a failure before that is the prologue's, not the hook's),
// closes fd 3 and calls the hook with the remaining arguments. Nothing from input
// is ever part of the script.
const callScript = `source "$1" >&2
shift
if ! declare -F -- "$1" >/dev/null; then
	printf 'switchyard: the hooks file defines no function %s\n' "$1" >&2
	exit 127
fi
printf . >&3
exec 3>&-
"$@"`

// checkScript is New's fixed script: bash -c checkScript bash <prologue> <hooks...>.
// It prints "missing NAME" for each hook the prologue does not define, then
// checkedMarker, so a prologue that exits while it is sourced is told apart.
const checkScript = `source "$1" >&2
shift
for h; do
	declare -F -- "$h" >/dev/null || printf 'missing %s\n' "$h"
done
printf '%s\n' ` + checkedMarker

const checkedMarker = "switchyard-hooks-checked"

// Timing of a hook process's end.
var (
	// cancelGrace is how long a cancelled hook's process group has between SIGINT
	// and SIGKILL.
	cancelGrace = 5 * time.Second
	// pipeGrace is how long output pipes may stay open after the hook exited (held
	// by a process it left in the background) before they are closed.
	pipeGrace = 2 * time.Second
)

// hookArgv is the argv of one hook call: the shell, the fixed script, $0, the
// prologue, the hook and its arguments, each its own argument.
func hookArgv(shell, hooks, hook string, args []string) []string {
	argv := []string{shell, "-c", callScript, filepath.Base(shell), hooks, hook}
	return append(argv, args...)
}

// checkArgv is the argv of New's check of the prologue.
func checkArgv(shell, hooks string, names []string) []string {
	argv := []string{shell, "-c", checkScript, filepath.Base(shell), hooks}
	return append(argv, names...)
}

// hookEnv is the hooks' environment: base (switchyard's own) then extra, without
// RemotePathVar, which only remote_exec gets, from the command.
func hookEnv(base, extra []string) []string {
	env := make([]string, 0, len(base)+len(extra))
	for _, list := range [][]string{base, extra} {
		for _, kv := range list {
			if !strings.HasPrefix(kv, RemotePathVar+"=") {
				env = append(env, kv)
			}
		}
	}
	return env
}

// remotePath joins the directories for RemotePathVar; a directory holding ':'
// (which would split it) or a NUL byte is refused.
func remotePath(dirs []string) (string, error) {
	for _, d := range dirs {
		if d == "" || strings.ContainsAny(d, ":\x00") {
			return "", fmt.Errorf("PATH directory %q cannot be appended (empty, or holds ':' or NUL)", d)
		}
	}
	return strings.Join(dirs, ":"), nil
}

// Run calls remote_exec with cmd.Argv as its arguments, cmd.Path in
// SWITCHYARD_REMOTE_PATH and the command's streams, and returns its exit status
// (128+n when the hook was killed by signal n). Exit status 255 is the hook's
// "node unreachable" (like ssh(1)) and is returned as an error wrapping
// effects.ErrUnreachable.
func (t *Transport) Run(ctx context.Context, cmd effects.Command) (int, error) {
	if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
		return -1, errors.New("shell transport: remote_exec: empty command")
	}
	// Under a deploy lock's fence the node runs the command only if the lock is
	// still this deployer's, checked in the same command.
	cmd.Argv = effects.FenceArgv(ctx, cmd.Argv)
	for i, a := range cmd.Argv {
		if strings.ContainsRune(a, 0) {
			return -1, fmt.Errorf("shell transport: remote_exec: argument %d of %s holds a NUL byte", i, cmd.Argv[0])
		}
	}
	path, err := remotePath(cmd.Path)
	if err != nil {
		return -1, fmt.Errorf("shell transport: remote_exec: %v", err)
	}
	errTail := &stream.Tail{}
	var stderr io.Writer = errTail
	if cmd.Stderr != nil {
		stderr = io.MultiWriter(cmd.Stderr, errTail)
	}
	code, err := t.call(ctx, HookRemoteExec, t.commandTimeout, cmd.Argv, []string{RemotePathVar + "=" + path}, cmd.Stdin, cmd.Stdout, stderr, errTail)
	if err != nil {
		return -1, err
	}
	if code == 255 {
		return -1, unreachable(HookRemoteExec, cmd.Argv[0], errTail.LastLine())
	}
	return code, nil
}

// step calls a hook that acts on the node, with timeout as its deadline; a
// non-zero status is an error naming the hook with the last line of its stderr,
// and 255 wraps effects.ErrUnreachable.
func (t *Transport) step(ctx context.Context, hook string, timeout time.Duration, args ...string) error {
	errTail := &stream.Tail{}
	code, err := t.call(ctx, hook, timeout, args, nil, nil, nil, errTail, errTail)
	switch {
	case err != nil:
		return err
	case code == 0:
		return nil
	case code == 255:
		return unreachable(hook, "", errTail.LastLine())
	}
	return hookFailed(hook, code, errTail.LastLine())
}

// output calls a local hook (no arguments) and returns its stdout (at most
// stream.MaxAnswer of it: the call fails past that).
func (t *Transport) output(ctx context.Context, hook string) (string, error) {
	var stdout bytes.Buffer
	errTail := &stream.Tail{}
	code, err := t.call(ctx, hook, localHookTimeout, nil, nil, nil, &stdout, errTail, errTail)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", hookFailed(hook, code, errTail.LastLine())
	}
	return stdout.String(), nil
}

// call runs one hook and returns its exit status. err is set when the hook could
// not be started, was interrupted, or was never reached (the prologue failed to
// load); errTail is the tail of the hook's stderr, for the message.
//
// The call is bounded (SPEC 6.9): at timeout (positive) the hook is interrupted
// and the call fails with an error matching context.DeadlineExceeded; and but for
// copy_closure's, whose output is the copy's, the hook's stdout and stderr
// together pass at most stream.MaxAnswer on: past it the hook is interrupted and
// the call fails with stream.ErrAnswerTooLarge.
func (t *Transport) call(ctx context.Context, hook string, timeout time.Duration, args, env []string, stdin io.Reader, stdout, stderr io.Writer, errTail *stream.Tail) (int, error) {
	marker, w, err := os.Pipe()
	if err != nil {
		return -1, fmt.Errorf("shell transport: %s: %v", hook, err)
	}
	defer marker.Close()
	if timeout <= 0 {
		timeout = node.DefaultCommandTimeout
	}
	ctx, stopT := context.WithTimeoutCause(ctx, timeout, &node.DeadlineError{What: hook + " call", Timeout: timeout})
	defer stopT()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var limit *stream.Limit
	if hook != HookCopyClosure {
		// Nil streams stay nil (/dev/null): a pipe would make a hook's leftover
		// background process hold its end up for pipeGrace.
		limit = stream.NewLimit(stream.MaxAnswer, func() { cancel(stream.ErrAnswerTooLarge) })
		if stdout != nil {
			stdout = limit.Writer(stdout)
		}
		if stderr != nil {
			stderr = limit.Writer(stderr)
		}
	}
	code, err := t.exec(ctx, hookArgv(t.shell, t.hooks, hook, args), env, stdin, stdout, stderr, w)
	if limit != nil && limit.Exceeded() && !errors.Is(err, stream.ErrAnswerTooLarge) {
		// The hook ended on its own right after its output passed the limit.
		err = fmt.Errorf("stopped: %w", stream.ErrAnswerTooLarge)
	}
	if err != nil {
		return -1, fmt.Errorf("shell transport: %s: %w", hook, err)
	}
	if !reached(marker) {
		msg := fmt.Sprintf("shell transport: %s: the hooks file %s did not load (exit %d)", hook, t.hooks, code)
		if last := errTail.LastLine(); last != "" {
			msg += ": " + last
		}
		return -1, errors.New(msg)
	}
	return code, nil
}

// exec runs argv as its own process group with the hooks' environment plus env,
// and returns its exit status (128+n when killed by signal n). marker, when not
// nil, becomes the child's fd 3 and is closed here. A cancelled ctx sends SIGINT to
// the group, then SIGKILL after cancelGrace.
func (t *Transport) exec(ctx context.Context, argv, env []string, stdin io.Reader, stdout, stderr io.Writer, marker *os.File) (int, error) {
	if marker != nil {
		defer marker.Close()
	}
	if ctx.Err() != nil {
		return -1, node.Stopped(ctx)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append([]string(nil), t.env...), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = pipeGrace
	if marker != nil {
		cmd.ExtraFiles = []*os.File{marker}
	}
	// Output after exec returns (from a process left behind) must not reach the
	// caller's writers any more.
	if stdout != nil {
		g := stream.NewGate(stdout)
		defer g.Close()
		cmd.Stdout = g
	}
	if stderr != nil {
		g := stream.NewGate(stderr)
		defer g.Close()
		cmd.Stderr = g
	}
	var in io.WriteCloser
	if stdin != nil {
		var err error
		if in, err = cmd.StdinPipe(); err != nil {
			return -1, err
		}
	}
	if err := cmd.Start(); err != nil {
		return -1, fmt.Errorf("cannot start %s: %v", argv[0], err)
	}
	if marker != nil {
		marker.Close()
	}
	if in != nil {
		// Not cmd.Stdin: Wait would wait for the copy, and a reader that never
		// ends would hold the status back. Wait closes the pipe.
		go func() {
			_, _ = io.Copy(in, stdin)
			_ = in.Close()
		}()
	}

	pgid, grace := cmd.Process.Pid, cancelGrace
	done := make(chan struct{})
	var interrupted atomic.Bool
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		interrupted.Store(true)
		_ = syscall.Kill(-pgid, syscall.SIGINT)
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	err := cmd.Wait()
	close(done)

	if interrupted.Load() {
		why, how := node.Stopped(ctx), "interrupted"
		if node.IsBound(why) {
			how = "stopped"
		}
		return -1, fmt.Errorf("%s: %w", how, why)
	}
	st := cmd.ProcessState
	if st == nil {
		return -1, err
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return st.ExitCode(), nil
}

// reached tells whether the hook script wrote its byte to fd 3. The process has
// exited, so the byte is in the pipe if it was ever written; the read does not
// block (a process the prologue left behind may still hold the write end).
func reached(r *os.File) bool {
	rc, err := r.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	_ = rc.Read(func(fd uintptr) bool {
		var b [1]byte
		for {
			m, err := syscall.Read(int(fd), b[:])
			if err == syscall.EINTR {
				continue
			}
			n = m
			return true
		}
	})
	return n > 0
}

// hookError is a hook's failure; when unreachable it matches effects.ErrUnreachable.
type hookError struct {
	msg         string
	unreachable bool
}

func (e *hookError) Error() string { return e.msg }
func (e *hookError) Is(target error) bool {
	return e.unreachable && target == effects.ErrUnreachable
}

func hookFailed(hook string, code int, last string) error {
	msg := fmt.Sprintf("shell transport: %s exited %d", hook, code)
	if last != "" {
		msg += ": " + last
	}
	return &hookError{msg: msg}
}

// unreachable is exit status 255 of a hook that acts on the node.
func unreachable(hook, command, last string) error {
	msg := fmt.Sprintf("shell transport: %s exited 255 (node unreachable)", hook)
	if command != "" {
		msg = fmt.Sprintf("shell transport: %s %s exited 255 (node unreachable)", hook, command)
	}
	if last != "" {
		msg += ": " + last
	}
	return &hookError{msg: msg, unreachable: true}
}
