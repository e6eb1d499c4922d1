// Package ssh is the ssh transport: one verified SSH connection per node, every command a session on it.
package ssh

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/redact"
	"github.com/switchyard-nix/switchyard/transports/node"
)

// Defaults of Config.
const (
	DefaultUser              = "root"
	DefaultPort              = 22
	DefaultDialTimeout       = 15 * time.Second
	DefaultKeepalive         = 15 * time.Second
	defaultKnownHostsSubpath = ".ssh/known_hosts"
)

// Config says how to reach one node over SSH. User, Port, KeyFiles and
// ProxyJump win over the ssh config (SSHConfigFile), which wins over the defaults.
type Config struct {
	// User defaults to the ssh config's User, then "root"; a user other than root
	// runs every command through "sudo -n" and must have passwordless sudo
	// (checked once, on the first connection: effects.ErrNoSudo).
	User string
	// Host is the name or address as given (IPv6 without brackets); the ssh
	// config's Host patterns match it and its HostName replaces it.
	Host string
	Port int // default: the ssh config's Port, then 22

	// SSHConfigFile is an ssh_config(5) file applied to Host and to the jump
	// hosts (HostName, Port, User, IdentityFile, ProxyJump). Empty means
	// ~/.ssh/config, which may be missing; NoSSHConfig reads none.
	SSHConfigFile string
	// ProxyJump is ssh's ProxyJump: "[user@]host[:port]" hops separated by
	// commas, the connection going through each in turn; "none" for none. Empty
	// takes the ssh config's. Every hop's host key is verified against known_hosts.
	ProxyJump string

	// KnownHostsFile verifies the host keys of the node and of its jump hosts,
	// each at the host:port the connection goes to; default ~/.ssh/known_hosts.
	KnownHostsFile string
	// HostKey pins the node's host key ("ssh-ed25519 AAAA..."); when set, the
	// known_hosts file is not used for the node (still for its jump hosts).
	HostKey string
	// KeyFiles are private key files (--ssh-key); when none are given, the ssh
	// config's IdentityFile entries that exist. The agent at $SSH_AUTH_SOCK is
	// used as well when that is set, and after it the default identity files
	// (~/.ssh/id_ed25519, id_ecdsa, id_rsa) that exist and load without a passphrase.
	KeyFiles []string

	DialTimeout time.Duration // TCP connect plus SSH handshake; default 15 s
	// Keepalive is the interval of keepalive@openssh.com requests that detect a
	// dead connection; default 15 s.
	Keepalive time.Duration
	// CommandTimeout is the deadline of each command after connect (SPEC 6.9):
	// at it the command is stopped on the node and Run fails, so a node that
	// never answers cannot stall a run. Default node.DefaultCommandTimeout
	// (10 min); a caller's earlier deadline wins.
	CommandTimeout time.Duration
	// CopyIdle bounds the closure copy instead, whose length grows with the
	// closure: it fails once no byte has moved to or from the node for that
	// long. Default node.DefaultCopyIdle (10 min).
	CopyIdle time.Duration
	// NoSubstitute streams every path the node lacks. By default the node first
	// fetches what the binary caches of its own Nix configuration hold (its
	// substituters and trusted keys: the deployer names none), and only the rest
	// is streamed (the node setting substituteOnNode, apply --no-substitute).
	NoSubstitute bool
}

// Transport reaches one node over SSH. It connects on the first Run and keeps one
// TCP connection for every command; it is safe for concurrent use.
type Transport struct {
	cfg      Config
	addr     string          // host:port as dialled and as known_hosts is asked
	signers  []gossh.Signer  // the key files'
	fallback []gossh.Signer  // the default identity files', tried after the agent
	pinned   gossh.PublicKey // nil: known_hosts
	jumps    []jumpHost      // the ProxyJump chain, first hop first

	mu      sync.Mutex
	client  *gossh.Client
	dead    chan struct{} // closed when client's connection (and its jump hosts') has ended
	refused error         // sticky: a host key refusal is never retried
	noSudo  error         // sticky: the user has no passwordless sudo
	sudoOK  bool          // the sudo check passed once
	closed  bool

	dials atomic.Int64 // TCP connections made, for tests

	node.Copies              // what the last CopyClosure did: LastCopy, CopyCounts
	node.NoSwitchRuntimeArgs // the body bounds the switch's unit
}

var (
	_ effects.Transport   = (*Transport)(nil)
	_ effects.CopyCounter = (*Transport)(nil)
)

// New checks cfg, applies the ssh config and the defaults and loads the key
// files. It does not touch the network: the connection is made by the first Run.
func New(cfg Config) (*Transport, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.Keepalive <= 0 {
		cfg.Keepalive = DefaultKeepalive
	}
	if cfg.User != "" {
		if err := checkUser(cfg.User); err != nil {
			return nil, err
		}
	}
	if err := checkHost(cfg.Host); err != nil {
		return nil, err
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("ssh: port %d out of range", cfg.Port)
	}
	sc, err := loadSSHConfig(cfg.SSHConfigFile)
	if err != nil {
		return nil, err
	}
	node, err := sc.resolve(endpoint{alias: cfg.Host, user: cfg.User, port: cfg.Port}, DefaultUser)
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User = node.host, node.port, node.user
	flagKeys := len(cfg.KeyFiles) > 0
	if !flagKeys {
		cfg.KeyFiles = existing(node.keyFiles)
	}
	jumpFromConfig := cfg.ProxyJump == ""
	if jumpFromConfig {
		cfg.ProxyJump = node.jump
	}
	chain, err := sc.jumpChain(cfg.ProxyJump)
	if err != nil {
		var named *configError
		if jumpFromConfig && !errors.As(err, &named) {
			err = sc.wrap(fmt.Errorf("ProxyJump of %s: %v", node.alias, err))
		}
		return nil, err
	}

	t := &Transport{cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}
	if cfg.HostKey != "" {
		key, _, _, _, err := gossh.ParseAuthorizedKey([]byte(cfg.HostKey))
		if err != nil {
			return nil, fmt.Errorf("ssh: pinned host key of %s not understood: %v", t.addr, err)
		}
		t.pinned = key
	}
	knownHosts := cfg.KnownHostsFile
	if knownHosts == "" && (t.pinned == nil || len(chain) > 0) {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("ssh: no known_hosts file given and no home directory: %v", err)
		}
		knownHosts = filepath.Join(home, defaultKnownHostsSubpath)
	}
	if t.pinned == nil {
		t.cfg.KnownHostsFile = knownHosts
	}
	if t.signers, err = loadKeys(cfg.KeyFiles, flagKeys); err != nil {
		return nil, err
	}
	if t.fallback, err = loadKeys(existing(defaultIdentities()), false); err != nil {
		return nil, err
	}
	for i, j := range chain {
		jh := jumpHost{user: j.user, addr: net.JoinHostPort(j.host, strconv.Itoa(j.port)), knownHosts: knownHosts}
		jh.what = fmt.Sprintf("jump host %s (%d of %d)", jh.addr, i+1, len(chain))
		// The node's keys, then the jump host's own IdentityFile entries.
		own, err := loadKeys(existing(j.keyFiles), false)
		if err != nil {
			return nil, err
		}
		jh.signers = append(slices.Clone(t.signers), own...)
		t.jumps = append(t.jumps, jh)
	}
	return t, nil
}

// defaultIdentityFiles are the keys ssh(1) tries when nothing names one, in its
// order (ssh(1) -i: ~/.ssh/id_rsa, id_ecdsa, id_ecdsa_sk, id_ed25519, id_ed25519_sk;
// SPEC 2 puts ed25519 first and leaves out the security-key types, which need a
// hardware token this client cannot drive).
var defaultIdentityFiles = []string{"id_ed25519", "id_ecdsa", "id_rsa"}

// defaultIdentities are the default identity files under ~/.ssh (none without a home).
func defaultIdentities() []string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return nil
	}
	out := make([]string, 0, len(defaultIdentityFiles))
	for _, f := range defaultIdentityFiles {
		out = append(out, filepath.Join(home, ".ssh", f))
	}
	return out
}

// loadKeys loads private key files. Keys from flags (strict) must all load;
// keys from the ssh config that cannot be used are skipped, as ssh(1) skips them.
// A passphrase-protected key is left to the agent. Errors never name a path.
func loadKeys(files []string, strict bool) ([]gossh.Signer, error) {
	agentSock := os.Getenv("SSH_AUTH_SOCK")
	var signers []gossh.Signer
	for i, file := range files {
		signer, err := loadKey(file)
		var missing *gossh.PassphraseMissingError
		switch {
		case err == nil:
			signers = append(signers, signer)
		case !strict:
		case errors.As(err, &missing) && agentSock != "":
			// An encrypted key is used through the agent, which holds it unlocked.
		case errors.As(err, &missing):
			return nil, fmt.Errorf("ssh: key file %d of %d is passphrase-protected and no ssh agent is running: add it to an agent", i+1, len(files))
		default:
			// The key's path is a credential path: never name it.
			return nil, fmt.Errorf("ssh: sshKeyFile (key file %d of %d): %v", i+1, len(files), err)
		}
	}
	return signers, nil
}

// existing keeps the files that exist (ssh(1) ignores a missing IdentityFile).
func existing(files []string) []string {
	var out []string
	for _, f := range files {
		if _, err := os.Stat(f); err == nil {
			out = append(out, f)
		}
	}
	return out
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
		// x/crypto/ssh's errors may quote the file (a PEM block's type): only the line.
		return nil, fmt.Errorf("line %d: not a private key in OpenSSH or PEM format", redact.PEMLine(data))
	}
	return signer, nil
}

// Target is "ssh user@host:port".
func (t *Transport) Target() string {
	return "ssh " + t.cfg.User + "@" + t.addr
}

// Close releases the connection (and the jump hosts' connections). Later Runs fail.
func (t *Transport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.client == nil {
		return nil
	}
	err := t.client.Close()
	t.client = nil
	// The jump hosts' connections close once the node's has ended.
	select {
	case <-t.dead:
	case <-time.After(5 * time.Second):
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}
