// Package localcmd runs a command on the deployer's machine (nix-store,
// nix-instantiate): an argv, never a shell string, under a context that stops it
// with SIGINT and, after a grace, SIGKILL, as terraform-exec stops OpenTofu.
package localcmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Grace is how long a cancelled command has between SIGINT and SIGKILL.
const Grace = 5 * time.Second

// Error is a command that failed: its argv, why, and its standard error.
type Error struct {
	Argv   []string
	Err    error
	Stderr string // trimmed
}

// Error names the command and carries the last line of its standard error, where
// tools print the one line that says why.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %v: %s", e.Argv[0], e.Err, LastLine(e.Stderr))
}

func (e *Error) Unwrap() error { return e.Err }

// Output runs argv with the environment env (nil: this process's) and returns its
// standard output; a failure is an *Error.
func Output(ctx context.Context, env []string, argv ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Env = &stdout, &stderr, env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = Grace
	if err := cmd.Run(); err != nil {
		return nil, &Error{Argv: argv, Err: err, Stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// LastLine is the last line of s, trimmed.
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
