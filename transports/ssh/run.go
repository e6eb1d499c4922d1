package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/node"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// cancelGrace is how long a cancelled command has between SIGINT and the session's close.
var cancelGrace = 2 * time.Second

// Run runs cmd.Argv on the node as one session of the shared connection and returns
// its exit status (128+n for a command killed by signal n).
func (t *Transport) Run(ctx context.Context, cmd effects.Command) (int, error) {
	if err := checkArgv0(cmd.Argv, t.cfg.User != "root"); err != nil {
		return -1, err
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	line := commandLine(cmd.Argv, cmd.Path, t.cfg.User != "root")

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
		return -1, fmt.Errorf("ssh %s: open session: %w", t.addr, ctx.Err())
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
	sess.Stdout, sess.Stderr = stdout, stderr
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
		// SIGINT, then close the session. sshd refuses signals in sessions of a
		// root login ("session signalling requires privilege separation"), and a
		// closed session without a terminal ends the command only when it next
		// writes output: after a second grace period Run returns regardless.
		_ = sess.Signal(gossh.SIGINT)
		select {
		case <-waited:
		case <-time.After(cancelGrace):
			_ = sess.Close()
			select {
			case <-waited:
			case <-time.After(cancelGrace):
			}
		}
		return -1, fmt.Errorf("ssh %s: %s interrupted: %w", t.addr, cmd.Argv[0], ctx.Err())
	}

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

// commandLine is the one command string the SSH protocol carries: every argv
// element and PATH directory single-quoted, nothing else from input. path is
// appended to the node's PATH (without an empty element when PATH is unset, which
// would mean the working directory). With sudo (a user other than root) the
// command runs under "sudo -n", and env carries PATH through sudo's reset.
func commandLine(argv, path []string, sudo bool) string {
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
