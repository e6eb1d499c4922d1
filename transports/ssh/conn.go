package ssh

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/transports/node"
	"github.com/switchyard-nix/switchyard/transports/stream"
)

// errClosed is returned by a Run after Close.
var errClosed = errors.New("ssh transport closed")

// conn returns the live client, dialling when there is none or the last one ended.
// dialled tells whether this call made the connection. A user other than root
// is checked for passwordless sudo once, on the first connection.
func (t *Transport) conn(ctx context.Context) (c *gossh.Client, dialled bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false, errClosed
	}
	if t.refused != nil {
		return nil, false, t.refused
	}
	if t.noSudo != nil {
		return nil, false, t.noSudo
	}
	if t.client != nil {
		select {
		case <-t.dead:
			t.client.Close()
			t.client = nil
		default:
			return t.client, false, nil
		}
	}
	c, jumps, seen, err := t.dial(ctx)
	if err != nil {
		if errors.Is(err, effects.ErrRefused) {
			t.refused = err
		}
		return nil, true, err
	}
	dead := make(chan struct{})
	go func(c *gossh.Client, jumps []*gossh.Client) {
		_ = c.Wait()
		for i := len(jumps) - 1; i >= 0; i-- {
			jumps[i].Close()
		}
		close(dead)
	}(c, jumps)
	go keepalive(c, t.cfg.Keepalive, dead, seen.Load)
	if t.cfg.User != "root" && !t.sudoOK {
		if err := t.checkSudo(ctx, c); err != nil {
			c.Close()
			if errors.Is(err, effects.ErrNoSudo) {
				t.noSudo = err
			}
			return nil, true, err
		}
		t.sudoOK = true
	}
	t.client, t.dead = c, dead
	return c, true, nil
}

// checkSudo runs "sudo -n true" on c: a user other than root needs passwordless
// sudo for every command. A refusal wraps effects.ErrNoSudo.
func (t *Transport) checkSudo(ctx context.Context, c *gossh.Client) error {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	sess, err := t.newSession(ctx, c)
	if err != nil {
		return node.Unreachable(err, "ssh %s: open session", t.addr)
	}
	defer sess.Close()
	// Only its end is kept: what a node answers is bounded (SPEC 6.9).
	var stderr stream.Tail
	sess.Stderr = stream.NewGate(&stderr)
	done := make(chan error, 1)
	go func() { done <- sess.Run("exec sudo -n true") }()
	select {
	case err = <-done:
	case <-ctx.Done():
		return node.Unreachable(ctx.Err(), "ssh %s: checking sudo", t.addr)
	}
	var exitErr *gossh.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exitErr):
		why := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(why, '\n'); i >= 0 {
			why = why[i+1:]
		}
		if len(why) > 200 {
			why = why[:200]
		}
		if why == "" {
			why = fmt.Sprintf("exit status %d", exitErr.ExitStatus())
		}
		return node.Wrap(effects.ErrNoSudo, nil,
			fmt.Sprintf("ssh %s: user %s cannot run commands as root: switchyard needs passwordless sudo (sudo -n true: %s)",
				t.addr, t.cfg.User, why))
	default:
		return node.Unreachable(err, "ssh %s: checking sudo", t.addr)
	}
}

// drop forgets c (when it is still the current client) and closes it, so the next
// conn dials again.
func (t *Transport) drop(c *gossh.Client) {
	t.mu.Lock()
	if t.client == c {
		t.client = nil
	}
	t.mu.Unlock()
	c.Close()
}

// keepalive sends keepalive@openssh.com every interval and closes c when a request
// fails, or stays unanswered for keepaliveMisses intervals in a row in which the
// node sent nothing at all (read tells the bytes read from the node so far): OpenSSH's
// ServerAliveCountMax, 3 by default, with the difference that a node that still sends
// (the window adjustments of data it consumes, a command's output) is alive, however
// late its answer. A busy node reads the request only after the data queued before it:
// sixteen containers on two shared cores left a copy's stream silent for over 15 s,
// and a one-interval deadline cut one copy in sixteen.
func keepalive(c *gossh.Client, every time.Duration, dead <-chan struct{}, read func() int64) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-dead:
			return
		case <-tick.C:
		}
		answered := make(chan error, 1)
		go func() {
			_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
			answered <- err
		}()
		if !awaitAnswer(answered, every, dead, read) {
			c.Close()
			return
		}
	}
}

// keepaliveMisses is how many intervals in a row a keepalive may go unanswered with
// nothing read from the node before the connection counts as dead.
const keepaliveMisses = 3

// awaitAnswer waits for a keepalive's answer: false when it failed, or when
// keepaliveMisses intervals in a row passed with no answer and nothing read from
// the node.
func awaitAnswer(answered <-chan error, every time.Duration, dead <-chan struct{}, read func() int64) bool {
	before := read()
	wait := time.NewTimer(every)
	defer wait.Stop()
	silent := 0
	for {
		select {
		case <-dead:
			return true // ended anyway: nothing to close
		case err := <-answered:
			return err == nil
		case <-wait.C:
			if now := read(); now != before {
				before, silent = now, 0
			} else if silent++; silent == keepaliveMisses {
				return false
			}
			wait.Reset(every)
		}
	}
}

// readCounter counts the bytes read from the node's stream, for keepalive.
type readCounter struct {
	net.Conn
	n *atomic.Int64
}

func (c readCounter) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// jumpHost is one ProxyJump hop in front of the node.
type jumpHost struct {
	what       string // "jump host 127.0.0.1:2222 (1 of 2)", for messages
	user       string
	addr       string // host:port as dialled (from the hop before) and as known_hosts is asked
	knownHosts string
	signers    []gossh.Signer
}

// dial connects to the node: one TCP connection to the first jump host (or the
// node), each later hop a direct-tcpip channel through the one before, every
// hop's host key verified. Each handshake is bounded by Config.DialTimeout and
// all of it by ctx. jumps are the jump hosts' clients, first hop first, for the
// caller to close once the node's client has ended.
func (t *Transport) dial(ctx context.Context) (c *gossh.Client, jumps []*gossh.Client, read *atomic.Int64, err error) {
	t.dials.Add(1)
	var agentConn net.Conn
	defer func() {
		if agentConn != nil {
			agentConn.Close()
		}
		if err != nil {
			for i := len(jumps) - 1; i >= 0; i-- {
				jumps[i].Close()
			}
			jumps = nil
		}
	}()
	for _, j := range t.jumps {
		nc, err := t.connect(ctx, jumps, j.addr, j.what)
		if err != nil {
			return nil, nil, nil, err
		}
		check, algos, err := hostKeyCheck(j.what, j.addr, nil, j.knownHosts, nc.RemoteAddr())
		if err != nil {
			nc.Close()
			return nil, nil, nil, err
		}
		jc, err := t.handshake(ctx, nc, j.what, j.addr, j.user, j.signers, &agentConn, check, algos)
		if err != nil {
			return nil, nil, nil, err
		}
		jumps = append(jumps, jc)
	}
	nc, err := t.connect(ctx, jumps, t.addr, t.addr)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(jumps) > 0 {
		// Closing the node's client closes the chain under it: a channel through
		// a jump host that stopped answering never sees its close confirmed.
		nc = &chainConn{Conn: nc, jumps: slices.Clone(jumps)}
	}
	read = new(atomic.Int64)
	nc = readCounter{Conn: nc, n: read}
	check, algos, err := t.hostKeyCheck(nc.RemoteAddr())
	if err != nil {
		nc.Close()
		return nil, nil, nil, err
	}
	c, err = t.handshake(ctx, nc, t.addr, t.addr, t.cfg.User, t.signers, &agentConn, check, algos)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, jumps, read, nil
}

// chainConn is the node's stream through jump hosts; closing it closes them.
type chainConn struct {
	net.Conn
	jumps []*gossh.Client
}

func (c *chainConn) Close() error {
	err := c.Conn.Close()
	for i := len(c.jumps) - 1; i >= 0; i-- {
		c.jumps[i].Close()
	}
	return err
}

// connect opens the stream to addr: TCP for the first hop, else a direct-tcpip
// channel through the last jump host.
func (t *Transport) connect(ctx context.Context, jumps []*gossh.Client, addr, what string) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	if len(jumps) == 0 {
		d := net.Dialer{KeepAlive: 15 * time.Second}
		nc, err := d.DialContext(dctx, "tcp", addr)
		if err != nil {
			return nil, t.unreachableVia(err, what, "")
		}
		return nc, nil
	}
	nc, err := jumps[len(jumps)-1].DialContext(dctx, "tcp", addr)
	if err != nil {
		return nil, t.unreachableVia(err, what, t.jumps[len(jumps)-1].what)
	}
	return nc, nil
}

// unreachableVia is the node's unreachable error for a hop that could not be
// reached (what), through the hop before it (via, "" for none).
func (t *Transport) unreachableVia(err error, what, via string) error {
	switch {
	case what == t.addr && via == "":
		return node.Unreachable(err, "ssh %s unreachable", t.addr)
	case what == t.addr:
		return node.Unreachable(err, "ssh %s unreachable through %s", t.addr, via)
	case via == "":
		return node.Unreachable(err, "ssh %s unreachable: %s", t.addr, what)
	default:
		return node.Unreachable(err, "ssh %s unreachable: %s through %s", t.addr, what, via)
	}
}

// handshake does the SSH handshake of one hop on nc (which it closes on failure),
// bounded by ctx and Config.DialTimeout. A host key refusal is returned as is.
func (t *Transport) handshake(ctx context.Context, nc net.Conn, what, addr, user string, signers []gossh.Signer,
	agentConn *net.Conn, check gossh.HostKeyCallback, algos []string) (*gossh.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	// The callback records its refusal: the handshake wraps the callback's error.
	var hostKeyErr error
	cfg := &gossh.ClientConfig{
		User: user,
		Auth: []gossh.AuthMethod{gossh.PublicKeysCallback(func() ([]gossh.Signer, error) {
			return authSigners(signers, t.fallback, agentConn)
		})},
		HostKeyCallback: func(hostname string, remote net.Addr, key gossh.PublicKey) error {
			hostKeyErr = check(hostname, remote, key)
			return hostKeyErr
		},
		HostKeyAlgorithms: algos,
		Timeout:           t.cfg.DialTimeout,
	}
	if deadline, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(deadline) // a channel through a jump host has no deadlines: ctx closes it
	}
	// A cancelled ctx (or the timeout) aborts the handshake by closing the stream.
	stop := context.AfterFunc(dctx, func() { nc.Close() })
	sc, chans, reqs, err := gossh.NewClientConn(nc, addr, cfg)
	stopped := stop()
	if err == nil && !stopped {
		sc.Close()
		err = dctx.Err()
	}
	if err != nil {
		nc.Close()
		if hostKeyErr != nil {
			return nil, hostKeyErr
		}
		var neg *gossh.AlgorithmNegotiationError
		if errors.As(err, &neg) && neg.What == "host key" {
			// The host offers none of the key types recorded for it: a changed key.
			return nil, node.Refused(nil, "host key of %s: the host offers none of the recorded key types %v", what, algos)
		}
		if ctx.Err() != nil {
			return nil, node.Unreachable(ctx.Err(), "ssh %s: connecting to %s", t.addr, what)
		}
		if what == t.addr {
			return nil, node.Unreachable(err, "ssh %s", t.addr)
		}
		return nil, node.Unreachable(err, "ssh %s: %s", t.addr, what)
	}
	_ = nc.SetDeadline(time.Time{})
	return gossh.NewClient(sc, chans, reqs), nil
}

// authSigners are the key files' signers, then the agent's, then the default
// identity files' (SPEC 2: as OpenSSH finds keys). One callback, so the client
// tries every key within one "publickey" method. The agent connection is kept in
// *agentConn for the caller to close after the handshake.
func authSigners(keys, fallback []gossh.Signer, agentConn *net.Conn) ([]gossh.Signer, error) {
	signers := slices.Clone(keys)
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if *agentConn == nil {
			if ac, err := net.Dial("unix", sock); err == nil {
				*agentConn = ac
			}
		}
		if *agentConn != nil {
			if more, err := agent.NewClient(*agentConn).Signers(); err == nil {
				signers = append(signers, more...)
			}
		}
	}
	signers = append(signers, fallback...)
	if len(signers) == 0 {
		return nil, errors.New("no ssh key: give --ssh-key, run an ssh agent or create ~/.ssh/id_ed25519")
	}
	return signers, nil
}

// hostKeyCheck returns the node's host key callback and the host key algorithms
// to offer (see the function hostKeyCheck).
func (t *Transport) hostKeyCheck(remote net.Addr) (gossh.HostKeyCallback, []string, error) {
	return hostKeyCheck(t.addr, t.addr, t.pinned, t.cfg.KnownHostsFile, remote)
}

// hostKeyCheck returns the host key callback of the host at addr (host:port, as
// known_hosts is asked; what names it in messages) and the host key algorithms
// to offer: exactly the key types recorded for it, so a host with several host
// keys presents the recorded one (x/crypto would take the first common type and
// then fail with a key mismatch). A host with no recorded key is refused here.
func hostKeyCheck(what, addr string, pinned gossh.PublicKey, knownHostsFile string, remote net.Addr) (gossh.HostKeyCallback, []string, error) {
	if pinned != nil {
		check := func(_ string, _ net.Addr, key gossh.PublicKey) error {
			if string(key.Marshal()) != string(pinned.Marshal()) {
				return node.Refused(nil, "host key of %s (%s) is not the pinned one (%s)", what,
					gossh.FingerprintSHA256(key), gossh.FingerprintSHA256(pinned))
			}
			return nil
		}
		return check, algorithmsFor([]string{pinned.Type()}), nil
	}
	db, err := knownhosts.New(knownHostsFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, node.Refused(nil, "host key of %s unknown: the known_hosts file does not exist", what)
		}
		return nil, nil, node.Refused(nil, "host key of %s cannot be checked: known_hosts: %v", what, err)
	}
	types := knownKeyTypes(db, addr, remote)
	if len(types) == 0 {
		return nil, nil, node.Refused(nil, "host %s is not in known_hosts", what)
	}
	check := func(hostname string, remote net.Addr, key gossh.PublicKey) error {
		err := db(hostname, remote, key)
		if err == nil {
			return nil
		}
		var revoked *knownhosts.RevokedError
		if errors.As(err, &revoked) {
			return node.Refused(nil, "host key of %s (%s) is revoked in known_hosts", what, gossh.FingerprintSHA256(key))
		}
		var keyErr *knownhosts.KeyError
		if errors.As(err, &keyErr) && len(keyErr.Want) == 0 {
			return node.Refused(nil, "host %s is not in known_hosts", what)
		}
		return node.Refused(nil, "host key of %s (%s) does not match known_hosts", what, gossh.FingerprintSHA256(key))
	}
	return check, algorithmsFor(types), nil
}

// knownKeyTypes lists the key types known_hosts records for addr (host:port). It
// asks the callback about a key of no real type: the refusal lists every recorded
// key of the host.
func knownKeyTypes(db gossh.HostKeyCallback, addr string, remote net.Addr) []string {
	if _, ok := remote.(*net.TCPAddr); !ok {
		remote = &net.TCPAddr{IP: net.IPv4zero, Port: 22}
	}
	err := db(addr, remote, probeKey{})
	var keyErr *knownhosts.KeyError
	if !errors.As(err, &keyErr) {
		return nil
	}
	var types []string
	for _, k := range keyErr.Want {
		if !slices.Contains(types, k.Key.Type()) {
			types = append(types, k.Key.Type())
		}
	}
	return types
}

// probeKey is a public key of a type no host has.
type probeKey struct{}

func (probeKey) Type() string                          { return "switchyard-probe@invalid" }
func (probeKey) Marshal() []byte                       { return []byte("\x00\x00\x00\x18switchyard-probe@invalid") }
func (probeKey) Verify([]byte, *gossh.Signature) error { return errors.New("probe key") }
func (probeKey) String() string                        { return "probe" }

var _ gossh.PublicKey = probeKey{}

// algorithmsFor maps key types to the host key algorithms that present them, in
// a fixed preference order.
func algorithmsFor(types []string) []string {
	pref := []string{
		gossh.KeyAlgoED25519, gossh.KeyAlgoECDSA521, gossh.KeyAlgoECDSA384, gossh.KeyAlgoECDSA256,
		gossh.KeyAlgoSKED25519, gossh.KeyAlgoSKECDSA256, gossh.KeyAlgoRSA,
	}
	var algos []string
	add := func(typ string) {
		if typ == gossh.KeyAlgoRSA {
			algos = append(algos, gossh.KeyAlgoRSASHA512, gossh.KeyAlgoRSASHA256)
			return
		}
		algos = append(algos, typ)
	}
	for _, p := range pref {
		if slices.Contains(types, p) {
			add(p)
		}
	}
	for _, typ := range types {
		if !slices.Contains(pref, typ) {
			add(typ)
		}
	}
	return algos
}

// Fresh dials a new connection (a new TCP connection and SSH handshake, the host key
// checked as on every dial) and makes it the one later commands run on: the
// confirmation after a switch must not ride on a connection the old generation let
// in (SPEC 4.6). The old connection is closed once the commands already running on
// it (a lease renewal) had the time to end.
func (t *Transport) Fresh(ctx context.Context) error {
	t.mu.Lock()
	old := t.client
	t.client = nil
	t.mu.Unlock()
	if old != nil {
		time.AfterFunc(freshCloseDelay, func() { old.Close() })
	}
	_, _, err := t.conn(ctx)
	return err
}

// freshCloseDelay is how long an old connection outlives Fresh, for the commands
// already running on it.
const freshCloseDelay = 30 * time.Second
