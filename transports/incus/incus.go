// Package incus is the incus transport: commands and copies through the Incus REST API over the daemon's local unix socket.
package incus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// Defaults of Config.
const (
	DefaultProject          = api.DefaultProject
	DefaultSocket           = api.DefaultSocket
	DefaultSwitchRuntimeMax = 900 * time.Second
)

// Config says how to reach one instance through the local Incus daemon.
type Config struct {
	Instance string // the instance's name
	Project  string // its project; default "default"
	// Socket is the daemon's unix socket; default $INCUS_DIR/unix.socket when
	// INCUS_DIR is set, else /var/lib/incus/unix.socket.
	Socket string
	// SwitchRuntimeMax bounds the switch's transient unit; default 900 s.
	SwitchRuntimeMax time.Duration
}

// Transport reaches one Incus instance through the daemon's REST API: every
// command is an exec operation with websocket streams. No network inside the
// instance is needed. It is safe for concurrent use.
type Transport struct {
	cfg Config
	c   *api.Client

	mu       sync.Mutex
	closed   bool
	lastCopy nixserve.Stats // what the last CopyClosure did
}

var (
	_ effects.Transport   = (*Transport)(nil)
	_ effects.CopyCounter = (*Transport)(nil)
)

// New checks cfg and applies the defaults. It does not talk to the daemon: the
// first Run does.
func New(cfg Config) (*Transport, error) {
	if err := checkName("instance", cfg.Instance); err != nil {
		return nil, err
	}
	if cfg.Project == "" {
		cfg.Project = DefaultProject
	}
	if err := checkName("project", cfg.Project); err != nil {
		return nil, err
	}
	if cfg.Socket == "" {
		cfg.Socket = api.Socket()
	}
	if cfg.SwitchRuntimeMax <= 0 {
		cfg.SwitchRuntimeMax = DefaultSwitchRuntimeMax
	}
	return &Transport{cfg: cfg, c: api.New(cfg.Socket)}, nil
}

// ParseTarget splits a --target of "[remote:]instance". Only the local daemon
// is reachable so far: a remote other than "local" (or "none") is refused.
func ParseTarget(s string) (instance string, err error) {
	remote, name, found := strings.Cut(s, ":")
	if !found {
		remote, name = "", s
	}
	switch remote {
	case "", "local", "none":
	default:
		return "", fmt.Errorf("incus remote %q: remotes of the Incus client configuration are not built yet; only the local daemon's unix socket is (give the instance alone, or local:<instance>)", remote)
	}
	if err := checkName("instance", name); err != nil {
		return "", err
	}
	return name, nil
}

// checkName refuses an empty instance or project name and one that cannot be a
// single path element of the API.
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("incus: no %s name", what)
	case strings.ContainsAny(name, "/?#%\\ \t\n") || name == "." || name == "..":
		return fmt.Errorf("incus: %s name %q is not valid", what, name)
	}
	return nil
}

// Target is "incus <project>/<instance>".
func (t *Transport) Target() string {
	return "incus " + t.cfg.Project + "/" + t.cfg.Instance
}

// SwitchRuntimeMaxArgs bounds the switch's transient unit by Config.SwitchRuntimeMax.
func (t *Transport) SwitchRuntimeMaxArgs() []string {
	secs := int64((t.cfg.SwitchRuntimeMax + time.Second - 1) / time.Second)
	return []string{"--property=RuntimeMaxSec=" + strconv.FormatInt(secs, 10)}
}

// Close releases the idle connections to the daemon. Later Runs fail.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.c.Close()
	return nil
}

// systemProfile is the NixOS system profile.
const systemProfile = "/nix/var/nix/profiles/system"

// FinalizeBootloader points the system profile at toplevel. A container has no
// bootloader: the host starts it from the system profile, so there is no boot
// entry to install.
func (t *Transport) FinalizeBootloader(ctx context.Context, toplevel string) error {
	if !strings.HasPrefix(toplevel, "/") {
		return fmt.Errorf("finalize: toplevel %q is not a store path", toplevel)
	}
	return t.step(ctx, "set the system profile", []string{toplevel + "/sw/bin"},
		"nix-env", "-p", systemProfile, "--set", toplevel)
}

// RevertBootloader does nothing: a container has no bootloader and no boot entry
// (a NixOS container's switch-to-configuration installs none), and the system
// profile, which is what the container boots, is set only by FinalizeBootloader
// at the end of a deploy; a switch that never activated has not changed it, so
// there is nothing to point back.
func (t *Transport) RevertBootloader(ctx context.Context) error {
	return nil
}

// step runs one command of a bootloader hook; its error names the step, the exit
// status and the last line of stderr.
func (t *Transport) step(ctx context.Context, what string, path []string, argv ...string) error {
	var errOut stream.Tail
	code, err := t.Run(ctx, effects.Command{Argv: argv, Stderr: &errOut, Path: path})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if code != 0 {
		msg := fmt.Sprintf("%s: %s exited %d", what, argv[0], code)
		if last := errOut.LastLine(); last != "" {
			msg += ": " + last
		}
		return errors.New(msg)
	}
	return nil
}

// wrapped is an error with its own message that still matches a sentinel
// (effects.ErrUnreachable) and its cause with errors.Is/As.
type wrapped struct {
	msg   string
	kind  error
	cause error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

func unreachable(cause error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if cause != nil {
		msg += ": " + cause.Error()
	}
	return &wrapped{msg: msg, kind: effects.ErrUnreachable, cause: cause}
}
