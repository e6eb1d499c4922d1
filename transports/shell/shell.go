// Package shell is the compatibility transport: the hooks of SPEC 5 are shell
// functions defined in a prologue file (--hooks FILE), so an existing shell
// transport keeps working under the Go deploy body.
//
// # The hook contract
//
// The prologue is a bash file defining six functions:
//
//	target                    print the node's printable name on stdout (one line)
//	remote_exec ARGV...       run ARGV on the node with root rights
//	copy_closure PATH...      make the store paths and their closures valid on the node
//	switch_runtime_max_args   print extra systemd-run arguments for the switch's unit, one per line
//	finalize_bootloader TOP   point the system profile and the default boot entry at TOP
//	revert_bootloader         point the default boot entry back at the running generation
//
// Every hook call is a new process:
//
//	bash -c '<fixed script>' bash <prologue> <hook> <args...>
//
// The fixed script sources the prologue, shifts it off and calls the named function
// with the remaining arguments ("$@"). Arguments are passed as arguments, never
// interpolated into a shell string; a hook that builds a command line for the node
// (ssh(1) carries one string) must quote each argument itself, e.g. with printf %q.
// The prologue is sourced at top level with those positional parameters set; it
// should only define functions and variables. It may read its own settings from the
// environment: each hook inherits switchyard's environment plus Config.Env.
//
// remote_exec gets the command's stdin, stdout and stderr, and its exit status is
// the command's. A shell function cannot tell "the command exited 255" from "ssh
// could not reach the node", so, as with ssh(1), exit status 255 from remote_exec
// (and from copy_closure, finalize_bootloader and revert_bootloader) means the node
// could not be reached: the error wraps effects.ErrUnreachable.
//
// Directories the body appends to the node's PATH (<toplevel>/sw/bin, SPEC 3) reach
// remote_exec as the environment variable SWITCHYARD_REMOTE_PATH, colon-separated
// (empty when there are none). The hook must append it to the remote command's PATH,
// when it is not empty, for example with a remote command line of
//
//	PATH="${PATH:+$PATH:}"<quoted $SWITCHYARD_REMOTE_PATH>; export PATH; exec <quoted argv>
//
// The other hooks never see SWITCHYARD_REMOTE_PATH.
//
// A hook that exits non-zero fails with an error naming the hook and carrying the
// last line of its stderr (remote_exec's status is returned as the command's
// instead). The output of target is cached after its first success. When target or
// switch_runtime_max_args fail (their Go methods return no error), Target falls back
// to "shell <prologue file name>" and SwitchRuntimeMaxArgs to no arguments. The
// switch is bounded by the body whatever the hook prints: DEPLOY_SWITCH_TIMEOUT
// becomes TimeoutStartSec= after the hook's arguments (a oneshot unit ignores
// RuntimeMaxSec=).
//
// Cancelling a hook's context sends SIGINT to the hook's process group (each call
// runs in its own), then SIGKILL to the group when it has not ended after a grace
// period. That ends the local processes only: remote_exec must itself make the
// command end on the node when its local side ends (ssh(1) does not; see the
// watchdog of testdata/ssh-hooks.sh).
package shell

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/node"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// The hooks a prologue defines, in SPEC 5's order.
const (
	HookTarget               = "target"
	HookRemoteExec           = "remote_exec"
	HookCopyClosure          = "copy_closure"
	HookSwitchRuntimeMaxArgs = "switch_runtime_max_args"
	HookFinalizeBootloader   = "finalize_bootloader"
	HookRevertBootloader     = "revert_bootloader"
	DefaultShell             = "bash"
	RemotePathVar            = "SWITCHYARD_REMOTE_PATH"
)

// Hooks lists every hook a prologue must define.
var Hooks = []string{
	HookTarget, HookRemoteExec, HookCopyClosure,
	HookSwitchRuntimeMaxArgs, HookFinalizeBootloader, HookRevertBootloader,
}

// localHookTimeout bounds the hooks that have no context of their own (target,
// switch_runtime_max_args) and New's check of the prologue.
var localHookTimeout = 30 * time.Second

// DefaultCopyTimeout is Config.CopyTimeout's default: copy_closure's whole call,
// since switchyard cannot see its bytes move.
const DefaultCopyTimeout = 2 * time.Hour

// Config says where the hooks are.
type Config struct {
	Hooks string   // the prologue file defining the hooks
	Shell string   // a bash; default "bash" (found on PATH)
	Env   []string // extra environment for the hooks, "NAME=value"
	// CommandTimeout is the deadline of each remote_exec, finalize_bootloader and
	// revert_bootloader call (SPEC 6.9): at it the hook is interrupted, then
	// killed, and the call fails. Default node.DefaultCommandTimeout (10 min); a
	// caller's earlier deadline wins.
	CommandTimeout time.Duration
	// CopyTimeout is the deadline of a copy_closure call, whose length grows
	// with the closure and whose bytes switchyard cannot see. Default
	// DefaultCopyTimeout (2 h).
	CopyTimeout time.Duration
}

// Transport runs the hooks of one prologue file. It holds no connection; it is
// safe for concurrent use.
type Transport struct {
	hooks string // absolute path of the prologue
	shell string
	// commandTimeout and copyTimeout are Config's, with the defaults applied.
	commandTimeout, copyTimeout time.Duration
	env                         []string // the hooks' environment, without RemotePathVar

	mu     sync.Mutex
	target string // cached output of target
}

var _ effects.Transport = (*Transport)(nil)

// New checks that the prologue exists and defines every hook (sourcing it in a
// bash with a fixed script); a missing hook is an error naming it. It does not
// touch the node.
func New(cfg Config) (*Transport, error) {
	if cfg.Hooks == "" {
		return nil, errors.New("shell transport: no hooks file given (--hooks)")
	}
	if cfg.Shell == "" {
		cfg.Shell = DefaultShell
	}
	abs, err := filepath.Abs(cfg.Hooks)
	if err != nil {
		return nil, fmt.Errorf("shell transport: hooks file %s: %v", cfg.Hooks, err)
	}
	st, err := os.Stat(abs)
	switch {
	case err != nil:
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("shell transport: hooks file %s: %v", cfg.Hooks, err)
	case st.IsDir():
		return nil, fmt.Errorf("shell transport: hooks file %s is a directory", cfg.Hooks)
	}
	for i, kv := range cfg.Env {
		// Never print the entry: it may hold a secret.
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.ContainsRune(kv, 0) {
			return nil, fmt.Errorf("shell transport: environment entry %d of %d is not NAME=value", i+1, len(cfg.Env))
		}
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = node.DefaultCommandTimeout
	}
	if cfg.CopyTimeout <= 0 {
		cfg.CopyTimeout = DefaultCopyTimeout
	}
	t := &Transport{hooks: abs, shell: cfg.Shell, env: hookEnv(os.Environ(), cfg.Env),
		commandTimeout: cfg.CommandTimeout, copyTimeout: cfg.CopyTimeout}
	ctx, cancel := context.WithTimeout(context.Background(), localHookTimeout)
	defer cancel()
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// check sources the prologue and asks which hooks it defines.
func (t *Transport) check(ctx context.Context) error {
	var stdout bytes.Buffer
	stderr := &stream.Tail{}
	limit := stream.NewLimit(stream.MaxAnswer, nil)
	code, err := t.exec(ctx, checkArgv(t.shell, t.hooks, Hooks), nil, nil, limit.Writer(&stdout), stderr, nil)
	if err != nil {
		return fmt.Errorf("shell transport: checking hooks file %s: %w", t.hooks, err)
	}
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	if code != 0 || len(lines) == 0 || lines[len(lines)-1] != checkedMarker {
		msg := fmt.Sprintf("shell transport: hooks file %s did not load (%s exited %d)", t.hooks, t.shell, code)
		if last := stderr.LastLine(); last != "" {
			msg += ": " + last
		}
		return errors.New(msg)
	}
	var missing []string
	for _, l := range lines[:len(lines)-1] {
		if name, ok := strings.CutPrefix(l, "missing "); ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("shell transport: hooks file %s does not define %s", t.hooks, strings.Join(missing, ", "))
	}
	return nil
}

// Target is the output of the target hook (its first line), cached after the
// first success.
func (t *Transport) Target() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.target != "" {
		return t.target
	}
	ctx, cancel := context.WithTimeout(context.Background(), localHookTimeout)
	defer cancel()
	out, err := t.output(ctx, HookTarget)
	name, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	name = strings.TrimSpace(name)
	if err != nil || name == "" {
		return "shell " + filepath.Base(t.hooks)
	}
	t.target = name
	return name
}

// SwitchRuntimeMaxArgs are the lines switch_runtime_max_args prints (empty lines
// dropped). When the hook fails, or its first argument is not an option (systemd-run
// would run it as the command), there are none: the body's bound still applies.
func (t *Transport) SwitchRuntimeMaxArgs() []string {
	ctx, cancel := context.WithTimeout(context.Background(), localHookTimeout)
	defer cancel()
	out, err := t.output(ctx, HookSwitchRuntimeMaxArgs)
	args := parseLines(out)
	if err != nil || (len(args) > 0 && !strings.HasPrefix(args[0], "-")) {
		return nil
	}
	return args
}

// parseLines splits a hook's output into its non-empty lines.
func parseLines(out string) []string {
	var args []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSuffix(l, "\r")
		if l != "" {
			args = append(args, l)
		}
	}
	return args
}

// CopyClosure calls copy_closure with the store paths as arguments.
func (t *Transport) CopyClosure(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	for _, p := range paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("shell transport: copy_closure: %q is not a store path", p)
		}
	}
	return t.step(ctx, HookCopyClosure, t.copyTimeout, paths...)
}

// FinalizeBootloader calls finalize_bootloader with the toplevel.
func (t *Transport) FinalizeBootloader(ctx context.Context, toplevel string) error {
	if !strings.HasPrefix(toplevel, "/") {
		return fmt.Errorf("shell transport: finalize_bootloader: toplevel %q is not a store path", toplevel)
	}
	if err := t.checkFence(ctx, HookFinalizeBootloader); err != nil {
		return err
	}
	return t.step(ctx, HookFinalizeBootloader, t.commandTimeout, toplevel)
}

// RevertBootloader calls revert_bootloader.
func (t *Transport) RevertBootloader(ctx context.Context) error {
	if err := t.checkFence(ctx, HookRevertBootloader); err != nil {
		return err
	}
	return t.step(ctx, HookRevertBootloader, t.commandTimeout)
}

// Fresh does nothing: every remote_exec is a new process, so the confirmation after
// a switch (SPEC 4.6) is a fresh connection when the hook opens one per call (ssh(1)
// without ControlMaster/ControlPersist); a hook that shares a connection makes it
// prove nothing.
func (t *Transport) Fresh(ctx context.Context) error { return nil }

// checkFence asks the node, before a bootloader hook, whether the deploy lock of
// ctx's fence is still this deployer's. The hooks are the operator's shell
// functions, which switchyard cannot wrap, so this check is the command right
// before the hook, not the hook's own: a gap the ssh and incus transports do not
// have (they fence each of the hook's commands).
func (t *Transport) checkFence(ctx context.Context, hook string) error {
	if _, ok := effects.FenceToken(ctx); !ok {
		return nil
	}
	errTail := &stream.Tail{}
	code, err := t.Run(ctx, effects.Command{Argv: []string{"true"}, Stderr: errTail})
	if err != nil {
		return fmt.Errorf("shell transport: %s: checking the deploy lock: %w", hook, err)
	}
	if code != 0 {
		return fmt.Errorf("shell transport: %s not called: %s", hook, errTail.LastLine())
	}
	return nil
}

// Close releases nothing: every hook call is its own process.
func (t *Transport) Close() error { return nil }
