package incus

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"

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

// Run runs cmd.Argv on the instance as one exec operation of the Incus API (argv
// as it is: no shell) and returns its exit status. The daemon's socket not
// answering, and the instance missing or not running, wrap effects.ErrUnreachable.
// A cancelled ctx sends the command SIGTERM and, after a grace period, closes its
// streams, which makes the daemon kill it.
func (t *Transport) Run(ctx context.Context, cmd effects.Command) (int, error) {
	if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
		return -1, errors.New("incus: empty command")
	}
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
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	// The writers are closed when Run returns: after a cancel the streams may
	// still deliver output, which must not reach the caller's writers any more.
	stdout, stderr := stream.NewGate(cmd.Stdout), stream.NewGate(cmd.Stderr)
	defer stdout.Close()
	defer stderr.Close()
	req := api.ExecRequest{Command: cmd.Argv, Environment: map[string]string{"PATH": path}}
	code, err := t.c.Exec(ctx, t.cfg.Instance, t.cfg.Project, req, cmd.Stdin, stdout, stderr)
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

// classify turns an error of an exec into the transport's: unreachable when the
// daemon or the instance cannot be reached, ctx's error when cancelled.
func (t *Transport) classify(ctx context.Context, err error, argv0 string) error {
	target := t.Target()
	var badCert *tls.CertificateVerificationError
	switch {
	case errors.Is(err, api.ErrExecCancelled) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %s interrupted: %w", target, argv0, ctx.Err())
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
