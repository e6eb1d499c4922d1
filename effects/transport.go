package effects

import (
	"context"
	"errors"
	"io"
)

// Command is one command run on a node: argv exactly (never a shell string built
// from input), with the node's root rights.
type Command struct {
	Argv   []string
	Stdin  io.Reader // nil: empty
	Stdout io.Writer // nil: discarded
	Stderr io.Writer // nil: discarded
	// Path lists directories appended to the node's PATH for this command
	// (<toplevel>/sw/bin, so a node whose own PATH resolves nothing still works).
	Path []string
}

// Transport is how the deploy body reaches one node: the hooks of SPEC 5. The body
// never learns which transport it has.
type Transport interface {
	// Target is the node's printable name, e.g. "ssh root@192.0.2.10:22".
	Target() string
	// Run runs a command on the node and returns its exit status. err is non-nil
	// only when the command could not be run or its status could not be read; it
	// wraps ErrUnreachable when the node cannot be reached and ErrRefused when the
	// node must not be touched (host key mismatch). A transport reconnects on the
	// next Run after a dropped connection.
	//
	// Every command is bounded (SPEC 6.9): the transport reads at most 64 MiB of
	// its stdout and stderr together (past it the command is stopped on the node
	// and err says "node answer exceeds 64 MiB"), and stops it at the
	// transport's per-command deadline unless ctx ends first (err then matches
	// context.DeadlineExceeded and names the deadline). The copy's stream is
	// bounded by its silence instead.
	Run(ctx context.Context, cmd Command) (exit int, err error)
	// CopyClosure makes the store paths and their closures valid on the node,
	// sending only what is missing.
	CopyClosure(ctx context.Context, paths []string) error
	// SwitchRuntimeMaxArgs are extra systemd-run options for the switch's transient
	// unit (the shell transport's switch_runtime_max_args hook), e.g.
	// "--property=CPUQuota=50%". The bound is the body's: DEPLOY_SWITCH_TIMEOUT, as
	// TimeoutStartSec= after these (RuntimeMaxSec= does not bound a oneshot).
	SwitchRuntimeMaxArgs() []string
	// FinalizeBootloader points the system profile and the default boot entry at toplevel.
	FinalizeBootloader(ctx context.Context, toplevel string) error
	// RevertBootloader points the default boot entry back at the running generation.
	RevertBootloader(ctx context.Context) error
	// Fresh replaces the connection the earlier commands ran on with a new one, for
	// the confirmation after a switch (SPEC 4.6): a new TCP connection and SSH
	// handshake with the host key checked, a new API connection for incus. The
	// commands after it run on the new connection. An error wraps ErrUnreachable
	// when the node cannot be reached; the next Run tries again.
	Fresh(ctx context.Context) error
	// Close releases the connection.
	Close() error
}

var (
	// ErrUnreachable marks a transport error where the node could not be reached.
	ErrUnreachable = errors.New("node unreachable")
	// ErrRefused marks a transport error where the node must not be touched, e.g. its
	// host key does not match the pinned one.
	ErrRefused = errors.New("refused")
	// ErrNoSudo marks a transport error where the node answered but the login user
	// cannot run commands as root (no passwordless sudo): waiting does not help.
	ErrNoSudo = errors.New("no passwordless sudo")
)

// CopyCounter is what a transport may also tell about its last CopyClosure: the
// closure's paths, how many the node lacked, how many were sent, and the bytes
// written. The body logs it, so an operator sees that a re-deploy sent nothing.
type CopyCounter interface {
	CopyCounts() (paths, missing, sent int, bytes int64)
}

// SubstituteCounter is what a transport may also tell about its last
// CopyClosure's substitution on the node: whether the node was asked to fetch
// the missing paths from its own binary caches first, how many it did, and,
// when its caches failed (the copy then streamed the rest), the node's words.
type SubstituteCounter interface {
	CopySubstituted() (asked bool, substituted int, failed string)
}
