// Package ssh is the ssh transport: one verified SSH connection per node, every command a session on it.
package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/effects"
)

// Defaults of Config.
const (
	DefaultUser              = "root"
	DefaultPort              = 22
	DefaultDialTimeout       = 15 * time.Second
	DefaultKeepalive         = 15 * time.Second
	DefaultSwitchRuntimeMax  = 900 * time.Second
	defaultKnownHostsSubpath = ".ssh/known_hosts"
)

// Config says how to reach one node over SSH.
type Config struct {
	User string // default "root"; another user runs every command through "sudo -n"
	Host string // name or address; IPv6 without brackets
	Port int    // default 22

	// KnownHostsFile verifies the node's host key; default ~/.ssh/known_hosts.
	KnownHostsFile string
	// HostKey pins the node's host key ("ssh-ed25519 AAAA..."); when set, the
	// known_hosts file is not used.
	HostKey string
	// KeyFiles are private key files (--ssh-key). The agent at $SSH_AUTH_SOCK is
	// used as well when that is set.
	KeyFiles []string

	DialTimeout time.Duration // TCP connect plus SSH handshake; default 15 s
	// Keepalive is the interval of keepalive@openssh.com requests that detect a
	// dead connection; default 15 s.
	Keepalive time.Duration
	// SwitchRuntimeMax bounds the switch's transient unit; default 900 s.
	SwitchRuntimeMax time.Duration
}

// Transport reaches one node over SSH. It connects on the first Run and keeps one
// TCP connection for every command; it is safe for concurrent use.
type Transport struct {
	cfg     Config
	addr    string // host:port as dialled and as known_hosts is asked
	signers []gossh.Signer
	pinned  gossh.PublicKey // nil: known_hosts

	mu      sync.Mutex
	client  *gossh.Client
	dead    chan struct{} // closed when client's connection has ended
	refused error         // sticky: a host key refusal is never retried
	closed  bool

	dials atomic.Int64 // TCP connections made, for tests
}

var _ effects.Transport = (*Transport)(nil)

// New checks cfg, applies the defaults and loads the key files. It does not touch
// the network: the connection is made by the first Run.
func New(cfg Config) (*Transport, error) {
	if cfg.User == "" {
		cfg.User = DefaultUser
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.SwitchRuntimeMax <= 0 {
		cfg.SwitchRuntimeMax = DefaultSwitchRuntimeMax
	}
	if err := checkUser(cfg.User); err != nil {
		return nil, err
	}
	if err := checkHost(cfg.Host); err != nil {
		return nil, err
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("ssh: port %d out of range", cfg.Port)
	}
	t := &Transport{cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}
	if cfg.HostKey != "" {
		key, _, _, _, err := gossh.ParseAuthorizedKey([]byte(cfg.HostKey))
		if err != nil {
			return nil, fmt.Errorf("ssh: pinned host key of %s not understood: %v", t.addr, err)
		}
		t.pinned = key
	} else if cfg.KnownHostsFile == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("ssh: no known_hosts file given and no home directory: %v", err)
		}
		t.cfg.KnownHostsFile = filepath.Join(home, defaultKnownHostsSubpath)
	}
	agentSock := os.Getenv("SSH_AUTH_SOCK")
	for i, file := range cfg.KeyFiles {
		signer, err := loadKey(file)
		var missing *gossh.PassphraseMissingError
		switch {
		case errors.As(err, &missing) && agentSock != "":
			// An encrypted key is used through the agent, which holds it unlocked.
		case errors.As(err, &missing):
			return nil, fmt.Errorf("ssh: key file %d of %d is passphrase-protected and no ssh agent is running: add it to an agent", i+1, len(cfg.KeyFiles))
		case err != nil:
			// The key's path is a credential path: never name it.
			return nil, fmt.Errorf("ssh: key file %d of %d: %v", i+1, len(cfg.KeyFiles), err)
		default:
			t.signers = append(t.signers, signer)
		}
	}
	return t, nil
}

// loadKey reads and parses a private key file. Its errors never hold the path.
func loadKey(file string) (gossh.Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("cannot read it: %w", pe.Err)
		}
		return nil, errors.New("cannot read it")
	}
	signer, err := gossh.ParsePrivateKey(data)
	if err != nil {
		var missing *gossh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, err
		}
		return nil, fmt.Errorf("not a private key: %v", err)
	}
	return signer, nil
}

// Target is "ssh user@host:port".
func (t *Transport) Target() string {
	return "ssh " + t.cfg.User + "@" + t.addr
}

// SwitchRuntimeMaxArgs bounds the switch's transient unit by Config.SwitchRuntimeMax.
func (t *Transport) SwitchRuntimeMaxArgs() []string {
	secs := int64((t.cfg.SwitchRuntimeMax + time.Second - 1) / time.Second)
	return []string{"--property=RuntimeMaxSec=" + strconv.FormatInt(secs, 10)}
}

// Close releases the connection. Later Runs fail.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.client == nil {
		return nil
	}
	err := t.client.Close()
	t.client = nil
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// wrapped is an error with its own message that still matches a sentinel
// (effects.ErrUnreachable, effects.ErrRefused) and its cause with errors.Is/As.
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

func refused(format string, args ...any) error {
	return &wrapped{msg: fmt.Sprintf(format, args...) + ": refusing to touch the node", kind: effects.ErrRefused}
}
