package ssh

import (
	"context"
	"errors"
	"net"
	"os"
	"slices"
	"strconv"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/switchyard-nix/switchyard/effects"
)

// errClosed is returned by a Run after Close.
var errClosed = errors.New("ssh transport closed")

// conn returns the live client, dialling when there is none or the last one ended.
// dialled tells whether this call made the connection.
func (t *Transport) conn(ctx context.Context) (c *gossh.Client, dialled bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false, errClosed
	}
	if t.refused != nil {
		return nil, false, t.refused
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
	c, err = t.dial(ctx)
	if err != nil {
		if errors.Is(err, effects.ErrRefused) {
			t.refused = err
		}
		return nil, true, err
	}
	dead := make(chan struct{})
	go func() {
		_ = c.Wait()
		close(dead)
	}()
	go keepalive(c, t.cfg.Keepalive, dead)
	t.client, t.dead = c, dead
	return c, true, nil
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
// fails or is not answered within the next interval.
func keepalive(c *gossh.Client, every time.Duration, dead <-chan struct{}) {
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
		select {
		case <-dead:
			return
		case err := <-answered:
			if err != nil {
				c.Close()
				return
			}
		case <-time.After(every):
			c.Close()
			return
		}
	}
}

// dial opens the TCP connection and does the SSH handshake, bounded by ctx and
// Config.DialTimeout.
func (t *Transport) dial(ctx context.Context) (*gossh.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
	defer cancel()
	t.dials.Add(1)
	d := net.Dialer{KeepAlive: 15 * time.Second}
	nc, err := d.DialContext(dctx, "tcp", t.addr)
	if err != nil {
		return nil, unreachable(err, "ssh %s unreachable", t.addr)
	}
	check, algos, err := t.hostKeyCheck(nc.RemoteAddr())
	if err != nil {
		nc.Close()
		return nil, err
	}
	// The callback records its refusal: the handshake wraps the callback's error.
	var hostKeyErr error
	var agentConn net.Conn
	defer func() {
		if agentConn != nil {
			agentConn.Close()
		}
	}()
	cfg := &gossh.ClientConfig{
		User: t.cfg.User,
		Auth: []gossh.AuthMethod{gossh.PublicKeysCallback(func() ([]gossh.Signer, error) {
			return t.authSigners(&agentConn)
		})},
		HostKeyCallback: func(hostname string, remote net.Addr, key gossh.PublicKey) error {
			hostKeyErr = check(hostname, remote, key)
			return hostKeyErr
		},
		HostKeyAlgorithms: algos,
		Timeout:           t.cfg.DialTimeout,
	}
	if deadline, ok := dctx.Deadline(); ok {
		_ = nc.SetDeadline(deadline)
	}
	// A cancelled ctx aborts the handshake through the deadline.
	stop := context.AfterFunc(dctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	sc, chans, reqs, err := gossh.NewClientConn(nc, t.addr, cfg)
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
			// The node offers none of the key types recorded for it: a changed key.
			return nil, refused("host key of %s: the node offers none of the recorded key types %v", t.addr, algos)
		}
		if ctx.Err() != nil {
			return nil, unreachable(ctx.Err(), "ssh %s: connecting", t.addr)
		}
		return nil, unreachable(err, "ssh %s", t.addr)
	}
	_ = nc.SetDeadline(time.Time{})
	return gossh.NewClient(sc, chans, reqs), nil
}

// authSigners are the key files' signers, then the agent's. One callback, so the
// client tries every key within one "publickey" method. The agent connection is
// kept in *agentConn for the caller to close after the handshake.
func (t *Transport) authSigners(agentConn *net.Conn) ([]gossh.Signer, error) {
	signers := slices.Clone(t.signers)
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
	if len(signers) == 0 {
		return nil, errors.New("no ssh key: give --ssh-key or run an ssh agent")
	}
	return signers, nil
}

// hostKeyCheck returns the host key callback and the host key algorithms to offer:
// exactly the key types recorded for the node, so a node with several host keys
// presents the recorded one (x/crypto would take the first common type and then
// fail with a key mismatch). A node with no recorded key is refused here.
func (t *Transport) hostKeyCheck(remote net.Addr) (gossh.HostKeyCallback, []string, error) {
	if t.pinned != nil {
		pinned := t.pinned
		check := func(_ string, _ net.Addr, key gossh.PublicKey) error {
			if string(key.Marshal()) != string(pinned.Marshal()) {
				return refused("host key of %s (%s) is not the pinned one (%s)", t.addr,
					gossh.FingerprintSHA256(key), gossh.FingerprintSHA256(pinned))
			}
			return nil
		}
		return check, algorithmsFor([]string{pinned.Type()}), nil
	}
	db, err := knownhosts.New(t.cfg.KnownHostsFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, refused("host key of %s unknown: the known_hosts file does not exist", t.addr)
		}
		return nil, nil, refused("host key of %s cannot be checked: known_hosts: %v", t.addr, err)
	}
	types := knownKeyTypes(db, t.addr, remote)
	if len(types) == 0 {
		return nil, nil, refused("host %s is not in known_hosts", t.addr)
	}
	check := func(hostname string, remote net.Addr, key gossh.PublicKey) error {
		err := db(hostname, remote, key)
		if err == nil {
			return nil
		}
		var revoked *knownhosts.RevokedError
		if errors.As(err, &revoked) {
			return refused("host key of %s (%s) is revoked in known_hosts", t.addr, gossh.FingerprintSHA256(key))
		}
		var keyErr *knownhosts.KeyError
		if errors.As(err, &keyErr) && len(keyErr.Want) == 0 {
			return refused("host %s is not in known_hosts", t.addr)
		}
		return refused("host key of %s (%s) does not match known_hosts", t.addr, gossh.FingerprintSHA256(key))
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

// knownHostsLine is the known_hosts line pinning key for host:port.
func knownHostsLine(host string, port int, key gossh.PublicKey) string {
	return knownhosts.Line([]string{knownhosts.Normalize(net.JoinHostPort(host, strconv.Itoa(port)))}, key)
}

// hostKeyAlgorithms are the algorithms of hostKeyCheck, for ssh(1): from the pinned
// key, or from what known_hosts records for the node.
func (t *Transport) hostKeyAlgorithms() ([]string, error) {
	if t.pinned != nil {
		return algorithmsFor([]string{t.pinned.Type()}), nil
	}
	_, algos, err := t.hostKeyCheck(nil)
	return algos, err
}
