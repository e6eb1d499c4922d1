// Package incus is the incus transport: commands and copies through the Incus
// REST API, over the local daemon's unix socket or over HTTPS to a remote of
// the Incus client configuration.
package incus

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
	"github.com/switchyard-nix/switchyard/transports/incus/clientconf"
	"github.com/switchyard-nix/switchyard/transports/node"
)

// Defaults of Config.
const (
	DefaultProject = api.DefaultProject
	DefaultSocket  = api.DefaultSocket
)

// Config says how to reach one instance through an Incus daemon.
type Config struct {
	Instance string // the instance's name
	// Project is the instance's project; default the remote's project in the
	// Incus client configuration, else "default".
	Project string
	// Remote is a remote of the Incus client configuration ($INCUS_CONF, else
	// ~/.config/incus: config.yml, the client certificate, the pinned server
	// certificate); "" and "local" are the local daemon's unix socket.
	Remote string
	// KeyFile is the incusClientKeyFile setting: a PEM client key (with its
	// certificate, else the client configuration's) used for the HTTPS
	// Remote instead of the client configuration's key. "" for none.
	KeyFile string
	// Socket is the local daemon's unix socket; default $INCUS_DIR/unix.socket
	// when INCUS_DIR is set, else /var/lib/incus/unix.socket. Only without a
	// Remote.
	Socket string
	// CommandTimeout is the deadline of each command (SPEC 6.9): at it the
	// command is stopped in the instance and Run fails, so an instance that
	// never answers cannot stall a run. Default node.DefaultCommandTimeout
	// (10 min); a caller's earlier deadline wins.
	CommandTimeout time.Duration
	// CopyIdle bounds the closure copy instead, whose length grows with the
	// closure: it fails once no byte has moved to or from the instance for that
	// long. Default node.DefaultCopyIdle (10 min).
	CopyIdle time.Duration
	// NoSubstitute streams every path the node lacks. By default the node first
	// fetches what the binary caches of its own Nix configuration hold (its
	// substituters and trusted keys: the deployer names none), and only the rest
	// is streamed (the node setting substituteOnNode, apply --no-substitute).
	NoSubstitute bool
}

// Transport reaches one Incus instance through the daemon's REST API: every
// command is an exec operation with websocket streams. No network inside the
// instance is needed. It is safe for concurrent use.
type Transport struct {
	cfg Config
	c   *api.Client
	// remote is the name of the remote in Target, "" for the local socket.
	remote string

	mu     sync.Mutex
	closed bool
	kind   string // the instance's type as the API told it; "" until asked

	node.Copies              // what the last CopyClosure did: LastCopy, CopyCounts
	node.NoSwitchRuntimeArgs // the body bounds the switch's unit
}

var (
	_ effects.Transport   = (*Transport)(nil)
	_ effects.CopyCounter = (*Transport)(nil)
)

// New checks cfg and applies the defaults; a Remote is looked up in the Incus
// client configuration, whose errors (unknown remote, not an Incus server, no
// client certificate) name the remote. It does not talk to the daemon: the
// first Run does.
func New(cfg Config) (*Transport, error) {
	if err := checkName("instance", cfg.Instance); err != nil {
		return nil, err
	}
	if cfg.Project != "" {
		if err := checkName("project", cfg.Project); err != nil {
			return nil, err
		}
	}
	if isLocal(cfg.Remote) {
		if cfg.KeyFile != "" {
			_, err := clientconf.OpenWithKey(clientconf.Local, cfg.KeyFile)
			return nil, err
		}
		cfg.Remote = ""
		if cfg.Project == "" {
			cfg.Project = DefaultProject
		}
		if cfg.Socket == "" {
			cfg.Socket = api.Socket()
		}
		return &Transport{cfg: cfg, c: api.New(cfg.Socket)}, nil
	}
	if cfg.Socket != "" {
		return nil, fmt.Errorf("incus remote %q: a socket is for the local daemon only", cfg.Remote)
	}
	ep, err := clientconf.OpenWithKey(cfg.Remote, cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	if cfg.Project == "" {
		cfg.Project = ep.Project
	}
	if cfg.Project == "" {
		cfg.Project = DefaultProject
	}
	if err := checkName("project", cfg.Project); err != nil {
		return nil, err
	}
	cfg.Socket = ep.Socket // a remote whose address is unix://
	return &Transport{cfg: cfg, c: ep.Client(), remote: cfg.Remote}, nil
}

// isLocal tells whether a remote's name means the local daemon's socket.
func isLocal(remote string) bool {
	return remote == "" || remote == clientconf.Local || remote == "none"
}

// ParseTarget splits a --target of "[remote:]instance". No remote, "local" (and
// "none") are the local daemon's unix socket, returned as remote "".
func ParseTarget(s string) (remote, instance string, err error) {
	remote, name, found := strings.Cut(s, ":")
	if !found {
		remote, name = "", s
	}
	if isLocal(remote) {
		remote = ""
	} else if err := checkName("remote", remote); err != nil {
		return "", "", err
	}
	if err := checkName("instance", name); err != nil {
		return "", "", err
	}
	return remote, name, nil
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

// Target is "incus <project>/<instance>", "incus <remote>:<project>/<instance>"
// for a remote.
func (t *Transport) Target() string {
	if t.remote != "" {
		return "incus " + t.remote + ":" + t.cfg.Project + "/" + t.cfg.Instance
	}
	return "incus " + t.cfg.Project + "/" + t.cfg.Instance
}

// Close releases the idle connections to the daemon. Later Runs fail.
func (t *Transport) Close() error {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.c.Close()
	return nil
}

// Fresh drops the idle connections to the daemon, so the next command opens a new
// API connection and a new exec in the instance (SPEC 4.6); every exec already
// has its own websocket.
func (t *Transport) Fresh(ctx context.Context) error {
	t.c.Close()
	return nil
}
