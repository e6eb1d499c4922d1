package incus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
	"github.com/switchyard-nix/switchyard/transports/node"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// BasePath is the PATH every command starts with. An exec's environment replaces
// the one Incus would give the command, so it holds the directories of a NixOS
// system (wrappers first, as NixOS's own PATH does) and then those of an FHS
// system; Command.Path is appended to it.
const BasePath = "/run/wrappers/bin:/root/.nix-profile/bin:/nix/var/nix/profiles/default/bin:" +
	"/run/current-system/sw/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// commandPath is BasePath with extra appended.
func commandPath(extra []string) (string, error) {
	p := BasePath
	for _, dir := range extra {
		if dir == "" || strings.ContainsAny(dir, ":\x00") {
			return "", fmt.Errorf("incus: PATH directory %q is empty or holds ':'", dir)
		}
		p += ":" + dir
	}
	return p, nil
}

// exitNotFound is the exit status of a command whose program was not found, as
// a shell gives it.
const exitNotFound = 127

// execWrapper is the fixed script every command runs under:
//
//	/bin/sh -c execWrapper switchyard <argv...>
//
// The daemon signals only the process it started, and that process shares a
// process group with nothing in the instance, so a cancel could not reach the
// command's children. The script reports its pid on stderr (taken out again by
// stream.PIDLine) and execs the command under setsid, which makes that pid a
// new session and process group, the command's, that a cancel kills whole. Argv
// reaches the command as "$@", never parsed. A program that is not found gets
// the shell's message and status, as the daemon's own "command not found" did.
const execWrapper = `command -v "$1" >/dev/null 2>&1 || { printf '%s: command not found\n' "$1" >&2; exit 127; }
printf '` + stream.PIDPrefix + `%d\n' "$$" >&2
command -v setsid >/dev/null 2>&1 && exec setsid -- "$@"
exec "$@"`

// killScript sends signal $1 to the process group $2 (or, when it is no group
// because setsid was missing, to the process): the shell's builtin kill, no
// program needed.
const killScript = `kill -"$1" -"$2" 2>/dev/null || kill -"$1" "$2"`

// cancelGrace bounds each step of a cancel: the wait for the command's pid,
// each kill's exec, and the command's end after SIGTERM and after SIGKILL.
var cancelGrace = 2 * time.Second

// Run runs cmd.Argv on the instance as one exec operation of the Incus API
// (argv as it is, under execWrapper) and returns its exit status. The daemon's
// socket not answering, and the instance missing or not running, wrap
// effects.ErrUnreachable. A cancelled ctx ends the command's process group:
// SIGTERM, then SIGKILL after cancelGrace, each sent by an exec of its own;
// then the exec's streams are closed. The command is bounded (SPEC 6.9): it is
// stopped so, and Run fails, at Config.CommandTimeout (an error matching
// context.DeadlineExceeded) and once its stdout and stderr together pass
// stream.MaxAnswer (stream.ErrAnswerTooLarge), of which no more is passed on.
func (t *Transport) Run(ctx context.Context, cmd effects.Command) (int, error) {
	if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
		return -1, errors.New("incus: empty command")
	}
	b := node.Bound(ctx, cmd, t.cfg.CommandTimeout)
	defer b.Release()
	code, err := t.run(b.Ctx, b.Cmd)
	if tooLarge := b.Exceeded(); tooLarge != nil && !errors.Is(err, tooLarge) {
		// The command ended on its own right after its output passed the limit.
		return -1, fmt.Errorf("%s: %s: %w", t.Target(), cmd.Argv[0], tooLarge)
	}
	return code, err
}

// bulkRunner runs the copy's `nix-store --serve --write` without Run's bounds:
// node.CopyClosure bounds the copy by its silence instead, and nixserve reads the
// node's answers within bounds of its own.
type bulkRunner struct{ t *Transport }

func (b bulkRunner) Run(ctx context.Context, cmd effects.Command) (int, error) {
	return b.t.run(ctx, cmd)
}

// run is Run without its bounds.
func (t *Transport) run(ctx context.Context, cmd effects.Command) (int, error) {
	if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
		return -1, errors.New("incus: empty command")
	}
	// Under a deploy lock's fence the node runs the command only if the lock is
	// still this deployer's, checked in the same command.
	cmd.Argv = effects.FenceArgv(ctx, cmd.Argv)
	path, err := commandPath(cmd.Path)
	if err != nil {
		return -1, err
	}
	t.mu.Lock()
	closed := t.closed
	t.mu.Unlock()
	if closed {
		return -1, fmt.Errorf("%s: the transport is closed", t.Target())
	}
	if ctx.Err() != nil {
		return -1, node.Stopped(ctx)
	}
	// The writers are closed when Run returns: after a cancel the streams may
	// still deliver output, which must not reach the caller's writers any more.
	stdout, stderr := stream.NewGate(cmd.Stdout), stream.NewGate(cmd.Stderr)
	defer stdout.Close()
	defer stderr.Close()
	pidLine := stream.NewPIDLine(stderr)
	argv := append([]string{"/bin/sh", "-c", execWrapper, "switchyard"}, cmd.Argv...)
	req := api.ExecRequest{Command: argv, Environment: map[string]string{"PATH": path}}

	// The exec is cancelled only after the command's group was stopped: a
	// cancelled exec closes its streams, and the daemon then kills the one
	// process it started, not its children.
	execCtx, stopExec := context.WithCancel(context.WithoutCancel(ctx))
	defer stopExec()
	done := make(chan execResult, 1)
	go func() {
		code, err := t.c.Exec(execCtx, t.cfg.Instance, t.cfg.Project, req, cmd.Stdin, stdout, pidLine)
		done <- execResult{code, err}
	}()
	var code int
	select {
	case r := <-done:
		code, err = r.code, r.err
	case <-ctx.Done():
		stopErr := t.stop(pidLine, done)
		stopExec()
		why, how := node.Stopped(ctx), "interrupted"
		if node.IsBound(why) {
			how = "stopped"
		}
		if stopErr != nil {
			return -1, fmt.Errorf("%s: %s %s, and it may still run on the node (%v): %w", t.Target(), cmd.Argv[0], how, stopErr, why)
		}
		return -1, fmt.Errorf("%s: %s %s: %w", t.Target(), cmd.Argv[0], how, why)
	}
	_ = pidLine.Flush()
	if err == nil {
		return code, nil
	}
	var a *api.Error
	if errors.As(err, &a) && api.IsCommandNotFound(a.Msg) {
		// The daemon found no such program: what a shell says and exits with.
		_, _ = fmt.Fprintf(stderr, "%s: command not found\n", cmd.Argv[0])
		return exitNotFound, nil
	}
	return -1, t.classify(ctx, err, cmd.Argv[0])
}

// execResult is the end of one exec.
type execResult struct {
	code int
	err  error
}

// stop ends a cancelled command's process group: SIGTERM and, when the exec has
// not ended after cancelGrace, SIGKILL. The error says why the command may
// still run: its pid never came, or a kill could not be sent.
func (t *Transport) stop(pidLine *stream.PIDLine, done <-chan execResult) error {
	select {
	case <-pidLine.Ready():
	case <-done:
		return nil
	case <-time.After(cancelGrace):
		return errors.New("its pid never arrived, so no kill was sent")
	}
	pid := strconv.Itoa(pidLine.PID())
	for _, sig := range []string{"TERM", "KILL"} {
		ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		_, err := t.c.Exec(ctx, t.cfg.Instance, t.cfg.Project,
			api.ExecRequest{Command: []string{"/bin/sh", "-c", killScript, "switchyard", sig, pid}}, nil, nil, nil)
		cancel()
		if err != nil {
			return fmt.Errorf("SIG%s to its process group %s could not be sent: %w", sig, pid, err)
		}
		select {
		case <-done:
			return nil
		case <-time.After(cancelGrace):
		}
	}
	return fmt.Errorf("its process group %s did not end %v after SIGKILL", pid, cancelGrace)
}

// classify turns an error of an exec into the transport's: unreachable when the
// daemon or the instance cannot be reached, ctx's error when cancelled.
func (t *Transport) classify(ctx context.Context, err error, argv0 string) error {
	target := t.Target()
	var badCert *tls.CertificateVerificationError
	switch {
	case errors.Is(err, api.ErrExecCancelled) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %s interrupted: %w", target, argv0, node.Stopped(ctx))
		}
		return fmt.Errorf("%s: %s: %w", target, argv0, err)
	case api.IsServerCert(err):
		var sc *api.ServerCertError
		if errors.As(err, &sc) && sc.Got != "" {
			return node.Refused(err, "%s: the Incus remote at %s presents a server certificate (SHA-256 fingerprint %s) that is not the pinned one (%s)",
				target, t.c.Where(), sc.Got, sc.Want)
		}
		return node.Refused(err, "%s: the Incus remote at %s sends no server certificate", target, t.c.Where())
	case errors.As(err, &badCert):
		// No pin, and the system's roots do not vouch for the server: like an
		// unknown SSH host key.
		return node.Refused(err, "%s: the server certificate of the Incus remote at %s does not verify (%v); pin it as servercerts/%s.crt of the Incus client configuration",
			target, t.c.Where(), badCert.Err, t.remote)
	case api.IsDial(err):
		return node.Unreachable(err, "%s: the Incus daemon at %s does not answer", target, t.c.Where())
	case t.remote != "" && api.Code(err) == http.StatusForbidden:
		return node.Unreachable(err, "%s: the Incus remote at %s does not trust this client's certificate", target, t.c.Where())
	case api.IsNotFound(err):
		return node.Unreachable(err, "%s: no such instance", target)
	case instanceDown(err):
		return node.Unreachable(err, "%s: the instance is not running", target)
	}
	return fmt.Errorf("%s: %s: %w", target, argv0, err)
}

// instanceDown tells whether an API error says that the instance exists but
// does not run (stopped, frozen).
func instanceDown(err error) bool {
	var a *api.Error
	if !errors.As(err, &a) {
		return false
	}
	msg := strings.ToLower(a.Msg)
	return strings.Contains(msg, "not running") || strings.Contains(msg, "is frozen") || strings.Contains(msg, "is paused")
}
