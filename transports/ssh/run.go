package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/node"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// cancelGrace bounds each step of a cancel: the wait for the command's pid,
// sending a kill, and the command's end after SIGTERM and after SIGKILL.
var cancelGrace = 2 * time.Second

// Run runs cmd.Argv on the node as one session of the shared connection and returns
// its exit status (128+n for a command killed by signal n). A cancelled ctx ends
// the command's process group on the node: SIGTERM, then SIGKILL after
// cancelGrace, each sent by a kill in a new session on the same connection (sshd
// refuses signal requests in a root login's session, and a command without a
// terminal outlives its closed session). The command is bounded (SPEC 6.9): it is
// stopped so, and Run fails, at Config.CommandTimeout (an error matching
// context.DeadlineExceeded) and once its stdout and stderr together pass
// stream.MaxAnswer (stream.ErrAnswerTooLarge), of which no more is passed on.
func (t *Transport) Run(ctx context.Context, cmd effects.Command) (int, error) {
	b := node.Bound(ctx, cmd, t.cfg.CommandTimeout)
	defer b.Release()
	code, err := t.run(b.Ctx, b.Cmd, false)
	if tooLarge := b.Exceeded(); tooLarge != nil && !errors.Is(err, tooLarge) {
		// The command ended on its own right after its output passed the limit.
		return -1, fmt.Errorf("ssh %s: %s: %w", t.addr, cmd.Argv[0], tooLarge)
	}
	return code, err
}

// run is Run without its bounds; with wide the command's standard input is first
// made a wide pipe (wideStdin), for a command that reads a bulk stream (the copy,
// which node.CopyClosure bounds instead).
func (t *Transport) run(ctx context.Context, cmd effects.Command, wide bool) (int, error) {
	// Under a deploy lock's fence the node runs the command only if the lock is
	// still this deployer's, checked in the same command.
	cmd.Argv = effects.FenceArgv(ctx, cmd.Argv)
	if err := checkArgv0(cmd.Argv, t.cfg.User != "root"); err != nil {
		return -1, err
	}
	if ctx.Err() != nil {
		return -1, node.Stopped(ctx)
	}
	line := commandLine(cmd.Argv, cmd.Path, t.cfg.User != "root", wide)

	c, dialled, err := t.conn(ctx)
	if err != nil {
		return -1, err
	}
	sess, err := t.newSession(ctx, c)
	if err != nil && !dialled && ctx.Err() == nil && !isOpenRefused(err) {
		// The connection died since the last command: redial, once.
		t.drop(c)
		if c, _, err = t.conn(ctx); err != nil {
			return -1, err
		}
		sess, err = t.newSession(ctx, c)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		why := node.Stopped(ctx)
		if d := (*node.DeadlineError)(nil); errors.As(why, &d) {
			// No session opened within the command's whole deadline: the
			// connection is as good as dead, and the next Run dials anew.
			t.drop(c)
		}
		return -1, fmt.Errorf("ssh %s: open session: %w", t.addr, why)
	case isOpenRefused(err):
		// The connection is alive; sshd refused one more session (MaxSessions).
		return -1, fmt.Errorf("ssh %s: the node refused a new session: %w", t.addr, err)
	default:
		t.drop(c)
		return -1, node.Unreachable(err, "ssh %s: open session", t.addr)
	}
	defer sess.Close()

	// The writers are closed when Run returns: after a cancel the session may
	// still deliver output, which must not reach the caller's writers any more.
	stdout, stderr := stream.NewGate(cmd.Stdout), stream.NewGate(cmd.Stderr)
	defer stdout.Close()
	defer stderr.Close()
	// The command line reports the remote shell's pid first on stderr; it is
	// taken out before the caller's writer.
	pidLine := stream.NewPIDLine(stderr)
	sess.Stdout, sess.Stderr = stdout, pidLine
	if cmd.Stdin != nil {
		// A pipe, not sess.Stdin: Wait would wait for the copy, and a reader that
		// never ends would hold the command's status back.
		w, err := sess.StdinPipe()
		if err != nil {
			return -1, node.Unreachable(err, "ssh %s: stdin", t.addr)
		}
		go func() {
			_, _ = io.Copy(w, cmd.Stdin)
			_ = w.Close()
		}()
	}
	if err := sess.Start(line); err != nil {
		return -1, node.Unreachable(err, "ssh %s: start %s", t.addr, cmd.Argv[0])
	}

	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	select {
	case err = <-waited:
	case <-ctx.Done():
		stopErr := t.stop(c, sess, pidLine, waited)
		why, how := node.Stopped(ctx), "interrupted"
		if node.IsBound(why) {
			how = "stopped"
		}
		if stopErr != nil {
			return -1, fmt.Errorf("ssh %s: %s %s, and it may still run on the node (%v): %w", t.addr, cmd.Argv[0], how, stopErr, why)
		}
		return -1, fmt.Errorf("ssh %s: %s %s: %w", t.addr, cmd.Argv[0], how, why)
	}
	_ = pidLine.Flush()

	var exitErr *gossh.ExitError
	var missing *gossh.ExitMissingError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr):
		return exitErr.ExitStatus(), nil
	case errors.As(err, &missing):
		return -1, node.Unreachable(nil, "ssh %s: connection lost before %s returned its exit status", t.addr, cmd.Argv[0])
	default:
		return -1, node.Unreachable(err, "ssh %s: %s", t.addr, cmd.Argv[0])
	}
}

// stop ends a cancelled command: its process group gets SIGTERM and, when the
// session has not ended after cancelGrace, SIGKILL; the session is then closed.
// The error says why the command may still run: its pid never came, or a kill
// could not be sent (the connection is gone, sudo refused).
func (t *Transport) stop(c *gossh.Client, sess *gossh.Session, pidLine *stream.PIDLine, waited <-chan error) error {
	defer sess.Close()
	select {
	case <-pidLine.Ready():
	case <-waited:
		return nil
	case <-time.After(cancelGrace):
		return errors.New("its pid never arrived, so no kill was sent")
	}
	pid := pidLine.PID()
	for _, sig := range []string{"TERM", "KILL"} {
		if err := t.killGroup(c, pid, sig); err != nil {
			return err
		}
		select {
		case <-waited:
			return nil
		case <-time.After(cancelGrace):
		}
	}
	return fmt.Errorf("its process group %d did not end %v after SIGKILL", pid, cancelGrace)
}

// killGroup sends sig to the process group pgid on the node through a new
// session of c, bounded by cancelGrace. A group that is gone already is no error.
func (t *Transport) killGroup(c *gossh.Client, pgid int, sig string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	sess, err := t.newSession(ctx, c)
	if err != nil {
		return fmt.Errorf("SIG%s to its process group %d could not be sent: %w", sig, pgid, err)
	}
	defer sess.Close()
	var stderr stream.Tail
	sess.Stderr = &stderr
	done := make(chan error, 1)
	go func() { done <- sess.Run(killLine(pgid, sig, t.cfg.User != "root")) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return fmt.Errorf("SIG%s to its process group %d: no answer within %v", sig, pgid, cancelGrace)
	}
	var exitErr *gossh.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exitErr) && strings.Contains(strings.ToLower(stderr.String()), "no such process"):
		return nil
	case errors.As(err, &exitErr):
		return fmt.Errorf("SIG%s to its process group %d: kill exited %d: %s", sig, pgid, exitErr.ExitStatus(), stderr.LastLine())
	}
	return fmt.Errorf("SIG%s to its process group %d could not be sent: %w", sig, pgid, err)
}

// newSession opens a session on c; a cancelled ctx stops the wait (a session
// opened later is closed).
func (t *Transport) newSession(ctx context.Context, c *gossh.Client) (*gossh.Session, error) {
	type opened struct {
		s   *gossh.Session
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := c.NewSession()
		ch <- opened{s, err}
	}()
	select {
	case o := <-ch:
		return o.s, o.err
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.s != nil {
				o.s.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// isOpenRefused tells whether the server answered a channel open with a refusal:
// the connection itself is fine.
func isOpenRefused(err error) bool {
	var oce *gossh.OpenChannelError
	return errors.As(err, &oce)
}

// checkArgv0 refuses a command name the remote exec (or sudo, or its env) would
// read as an option or an assignment; viaSudo: the command runs under sudo.
func checkArgv0(argv []string, viaSudo bool) error {
	switch {
	case len(argv) == 0 || argv[0] == "":
		return errors.New("ssh: empty command")
	case strings.HasPrefix(argv[0], "-"):
		return fmt.Errorf("ssh: command %q starts with '-'", argv[0])
	case viaSudo && strings.Contains(argv[0], "="):
		return fmt.Errorf("ssh: command %q holds '=' (sudo would take it for a variable)", argv[0])
	}
	return nil
}

// shellQuote quotes s as one word for a POSIX shell: always in single quotes, a
// single quote inside written as '\”.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// pidReport is the start of every command line: the login shell writes its pid
// on stderr (taken out again by stream.PIDLine). sshd starts the shell of a
// session without a terminal in a session of its own (setsid), so that pid is
// the process group of the command, which exec keeps.
const pidReport = `printf '` + stream.PIDPrefix + `%d\n' "$$" >&2; `

// wideStdin makes the standard input of the session's shell a pipe of 1 MiB
// instead of the kernel's 64 KiB, when the node has perl (NixOS's default
// environment.defaultPackages holds it; without it nothing changes). sshd writes
// a session's data to the command's stdin pipe at most a pipe's worth per turn of
// its loop while it reads up to 256 KiB per turn from the connection, so during a
// bulk stream its channel buffer grows to the whole 2 MiB window, 32 KiB at a
// time, and OpenSSH reallocates and copies the buffer at each step (fresh pages
// each time above malloc's mmap threshold). A 4 MiB stream into a test-bed node
// cost its sshd 1.26 s of CPU through a 64 KiB pipe and 0.20 s through a 1 MiB
// one. 1031 is F_SETPIPE_SZ (the same on every Linux architecture); 1 MiB is the
// kernel's default pipe-max-size, up to which any user may grow a pipe. A failure
// (a smaller limit, stdin not a pipe) leaves the pipe as it was. The login user
// runs it, before sudo: the pipe is the session's.
const wideStdin = `command -v perl >/dev/null 2>&1 && perl -e 'fcntl(STDIN, 1031, 1048576)' 2>/dev/null; `

// commandLine is the one command string the SSH protocol carries: the pid
// report, then every argv element and PATH directory single-quoted, nothing else
// from input. path is appended to the node's PATH (without an empty element when
// PATH is unset, which would mean the working directory). With sudo (a user
// other than root) the command runs under "sudo -n", and env carries PATH
// through sudo's reset. wide: the stdin pipe is widened first (wideStdin).
func commandLine(argv, path []string, sudo, wide bool) string {
	return pidReport + execLine(argv, path, sudo, wide)
}

// execLine is commandLine without the pid report.
func execLine(argv, path []string, sudo, wide bool) string {
	var b strings.Builder
	if len(path) > 0 {
		b.WriteString(`PATH="${PATH:+$PATH:}"`)
		for i, dir := range path {
			if i > 0 {
				b.WriteString(":")
			}
			b.WriteString(shellQuote(dir))
		}
		b.WriteString("; export PATH; ")
	}
	if wide {
		b.WriteString(wideStdin)
	}
	b.WriteString("exec")
	if sudo {
		b.WriteString(" sudo -n")
		if len(path) > 0 {
			b.WriteString(` env PATH="$PATH"`)
		}
	}
	for _, a := range argv {
		b.WriteString(" ")
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

// killLine is the command line that sends sig (a name, e.g. "TERM") to the
// process group pgid: the login shell's builtin kill for root (no program
// needed on the node; dash's takes no "--"), kill(1) under sudo otherwise.
func killLine(pgid int, sig string, sudo bool) string {
	group := "-" + strconv.Itoa(pgid)
	if sudo {
		return execLine([]string{"kill", "-" + sig, "--", group}, nil, true, false)
	}
	return "kill -" + sig + " " + group
}
