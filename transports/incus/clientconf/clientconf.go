// Package clientconf reads the Incus command-line client's configuration
// (config.yml, the client certificate, the pinned server certificates) and
// turns one of its remotes into a client of the Incus REST API: the local
// daemon's unix socket, or HTTPS authenticated by the client certificate.
//
// The configuration directory is $INCUS_CONF, else ~/.config/incus. In it:
// config.yml (remotes: name: {addr, protocol, auth_type, project, public}),
// client.crt and client.key (the client certificate; clientcerts/<remote>.crt
// and .key for one remote take precedence), servercerts/<remote>.crt (the
// server certificate pinned when the remote was added). The system-wide
// configuration of the Incus client is not read.
package clientconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/switchyard-nix/switchyard/redact"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// Local is the name of the local daemon's remote (its unix socket).
const Local = "local"

// Dir is the Incus client's configuration directory: $INCUS_CONF when set,
// else ~/.config/incus.
func Dir() (string, error) {
	if d := os.Getenv("INCUS_CONF"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("the Incus client configuration: %w (set INCUS_CONF)", err)
	}
	return filepath.Join(home, ".config", "incus"), nil
}

// Remote is one remote of config.yml.
type Remote struct {
	Name     string
	Addr     string // "https://host:port", "host[:port]", "unix://", "unix:///path"
	Protocol string // "incus" (also when empty) or "simplestreams"
	AuthType string // "tls" (also when empty) or "oidc"
	Project  string // the remote's default project; "" for the daemon's default
	Public   bool
}

// Config is the Incus client configuration read from a directory.
type Config struct {
	Dir           string
	DefaultRemote string
	Remotes       map[string]Remote
}

// Load reads dir/config.yml. A directory without one has the Incus client's
// defaults: the remotes local (the unix socket) and images.
func Load(dir string) (*Config, error) {
	c := &Config{Dir: dir, DefaultRemote: Local, Remotes: map[string]Remote{
		Local:    {Name: Local, Addr: "unix://", Protocol: "incus"},
		"images": {Name: "images", Addr: "https://images.linuxcontainers.org", Protocol: "simplestreams", Public: true},
	}}
	path := filepath.Join(dir, "config.yml")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the Incus client configuration: %w", err)
	}
	var doc struct {
		DefaultRemote string `yaml:"default-remote"`
		Remotes       map[string]struct {
			Addr     string `yaml:"addr"`
			Protocol string `yaml:"protocol"`
			AuthType string `yaml:"auth_type"`
			Project  string `yaml:"project"`
			Public   bool   `yaml:"public"`
		} `yaml:"remotes"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("the Incus client configuration %s: %w", path, err)
	}
	if doc.DefaultRemote != "" {
		c.DefaultRemote = doc.DefaultRemote
	}
	for name, r := range doc.Remotes {
		c.Remotes[name] = Remote{Name: name, Addr: r.Addr, Protocol: r.Protocol, AuthType: r.AuthType, Project: r.Project, Public: r.Public}
	}
	return c, nil
}

// Endpoint is how to reach one remote's Incus API.
type Endpoint struct {
	Remote  string      // the remote's name ("local" for the unix socket)
	Socket  string      // the unix socket, for the local daemon; else ""
	Addr    string      // host:port of an HTTPS remote; else ""
	TLS     *tls.Config // the client certificate and the server's pin, for HTTPS
	Project string      // the remote's default project ("": the daemon's default)
}

// IsLocal tells whether the endpoint is a unix socket.
func (e *Endpoint) IsLocal() bool { return e.Socket != "" }

// Client is an API client of the endpoint.
func (e *Endpoint) Client() *api.Client {
	if e.IsLocal() {
		return api.New(e.Socket)
	}
	return api.NewRemote(e.Addr, e.TLS)
}

// Open finds remote in the Incus client configuration (Dir) and says how to
// reach it. "" and "local" are the local daemon's unix socket, without reading
// the configuration.
func Open(remote string) (*Endpoint, error) {
	if remote == "" || remote == Local {
		return &Endpoint{Remote: Local, Socket: api.Socket()}, nil
	}
	dir, err := Dir()
	if err != nil {
		return nil, fmt.Errorf("incus remote %q: %w", remote, err)
	}
	c, err := Load(dir)
	if err != nil {
		return nil, fmt.Errorf("incus remote %q: %w", remote, err)
	}
	return c.Endpoint(remote)
}

// OpenWithKey is Open with the client key of keyFile instead of the client
// configuration's: keyFile is a PEM file holding a private key, and the
// certificate it goes with when it holds a CERTIFICATE block too (else the
// configuration's client certificate, clientcerts/<remote>.crt or client.crt,
// is used). keyFile "" is Open. A key file is for an HTTPS remote only. Its
// errors name the setting (incusClientKeyFile), never the file's path or its
// content.
func OpenWithKey(remote, keyFile string) (*Endpoint, error) {
	if keyFile == "" {
		return Open(remote)
	}
	if remote == "" || remote == Local {
		return nil, errLocalKey(remote)
	}
	dir, err := Dir()
	if err != nil {
		return nil, fmt.Errorf("incus remote %q: %w", remote, err)
	}
	c, err := Load(dir)
	if err != nil {
		return nil, fmt.Errorf("incus remote %q: %w", remote, err)
	}
	return c.EndpointWithKey(remote, keyFile)
}

func errLocalKey(remote string) error {
	if remote == "" {
		remote = Local
	}
	return fmt.Errorf("incusClientKeyFile: the remote %q is the local daemon's unix socket, which takes no client key; a client key is for an HTTPS remote", remote)
}

// Endpoint says how to reach the remote name: its address, the TLS
// configuration (the client certificate; the server certificate pinned by
// servercerts/<name>.crt, else verified by the system's roots), its default
// project. Errors are one line naming the remote, and never a key's path.
func (c *Config) Endpoint(name string) (*Endpoint, error) {
	return c.endpoint(name, "")
}

// EndpointWithKey is Endpoint with the client key of keyFile (see
// OpenWithKey); keyFile "" is Endpoint.
func (c *Config) EndpointWithKey(name, keyFile string) (*Endpoint, error) {
	return c.endpoint(name, keyFile)
}

func (c *Config) endpoint(name, keyFile string) (*Endpoint, error) {
	if name == "" || name == Local {
		if keyFile != "" {
			return nil, errLocalKey(name)
		}
		return &Endpoint{Remote: Local, Socket: api.Socket()}, nil
	}
	r, ok := c.Remotes[name]
	if !ok {
		return nil, fmt.Errorf("incus remote %q is not in the Incus client configuration %s (remotes: %s)",
			name, filepath.Join(c.Dir, "config.yml"), strings.Join(c.names(), ", "))
	}
	switch r.Protocol {
	case "", "incus":
	default:
		return nil, fmt.Errorf("incus remote %q: protocol %q is an image server, not an Incus server (want protocol incus)", name, r.Protocol)
	}
	switch r.AuthType {
	case "", "tls":
	default:
		return nil, fmt.Errorf("incus remote %q: auth_type %q is not supported; only tls (the client certificate)", name, r.AuthType)
	}
	if err := checkProject(r.Project); err != nil {
		return nil, fmt.Errorf("incus remote %q: %w", name, err)
	}
	addr := r.Addr
	if i := strings.IndexByte(addr, ','); i >= 0 {
		addr = addr[:i] // several addresses: the first
	}
	addr = strings.TrimSpace(addr)
	if sock, ok := strings.CutPrefix(addr, "unix://"); ok {
		if keyFile != "" {
			return nil, errLocalKey(name)
		}
		if sock == "" {
			sock = api.Socket()
		}
		return &Endpoint{Remote: name, Socket: sock, Project: r.Project}, nil
	}
	hostPort, err := api.HostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("incus remote %q: %w", name, err)
	}
	host, _, _ := net.SplitHostPort(hostPort)
	var client tls.Certificate
	if keyFile != "" {
		client, err = c.clientCertWithKey(name, keyFile)
	} else {
		client, err = c.clientCert(name)
	}
	if err != nil {
		return nil, err
	}
	var conf *tls.Config
	pinned, err := c.serverCert(name)
	switch {
	case err != nil:
		return nil, err
	case pinned != nil:
		conf = api.PinnedTLS(client, pinned, host)
	default:
		conf = api.SystemTLS(client, host)
	}
	return &Endpoint{Remote: name, Addr: hostPort, TLS: conf, Project: r.Project}, nil
}

// names are the remotes' names, sorted.
func (c *Config) names() []string {
	var ns []string
	for n := range c.Remotes {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// clientCert loads the client certificate for remote: clientcerts/<remote>.crt
// and .key when both exist, else client.crt and client.key. Its errors name
// the remote, not the files.
func (c *Config) clientCert(remote string) (tls.Certificate, error) {
	crt, key := filepath.Join(c.Dir, "clientcerts", remote+".crt"), filepath.Join(c.Dir, "clientcerts", remote+".key")
	if !exists(crt) || !exists(key) {
		crt, key = filepath.Join(c.Dir, "client.crt"), filepath.Join(c.Dir, "client.key")
	}
	certPEM, err := os.ReadFile(crt)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("incus remote %q: the Incus client configuration has no client certificate (%s); `incus remote generate-certificate` makes one", remote, reason(err))
	}
	keyPEM, err := os.ReadFile(key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("incus remote %q: the Incus client configuration has no client key (%s)", remote, reason(err))
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("incus remote %q: the client certificate and key do not load: %v", remote, err)
	}
	return cert, nil
}

// clientCertWithKey loads the client key of keyFile and its certificate: the
// CERTIFICATE blocks of keyFile when it has any, else the configuration's
// client certificate for remote (clientcerts/<remote>.crt, else client.crt).
// Its errors name the setting, never the file's path or its content.
func (c *Config) clientCertWithKey(remote, keyFile string) (tls.Certificate, error) {
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("incusClientKeyFile: the key file cannot be read (%s)", reason(err))
	}
	hasKey, hasCert := false, false
	for rest := keyPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch {
		case block.Type == "CERTIFICATE":
			hasCert = true
		case strings.HasSuffix(block.Type, "PRIVATE KEY"):
			hasKey = true
		}
	}
	if !hasKey {
		return tls.Certificate{}, fmt.Errorf("incusClientKeyFile: line %d: the key file holds no PEM private key", redact.PEMLine(keyPEM))
	}
	certPEM := keyPEM
	if !hasCert {
		crt := filepath.Join(c.Dir, "clientcerts", remote+".crt")
		if !exists(crt) {
			crt = filepath.Join(c.Dir, "client.crt")
		}
		certPEM, err = os.ReadFile(crt)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("incusClientKeyFile: line %d: incus remote %q: the key file holds no certificate and the Incus client configuration has no client certificate (%s)", redact.PEMLine(keyPEM), remote, reason(err))
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The tls package's errors name no file, but may quote the key file's PEM
		// block types: redacted (SPEC 6.9).
		var content redact.Set
		content.AddContent(keyPEM)
		return tls.Certificate{}, fmt.Errorf("incusClientKeyFile: line %d: incus remote %q: the key does not go with the client certificate: %v", redact.PEMLine(keyPEM), remote, content.Error(err))
	}
	return cert, nil
}

// serverCert is the server certificate pinned for remote
// (servercerts/<remote>.crt), nil when there is none.
func (c *Config) serverCert(remote string) (*x509.Certificate, error) {
	path := filepath.Join(c.Dir, "servercerts", remote+".crt")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("incus remote %q: the pinned server certificate: %w", remote, err)
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("incus remote %q: the pinned server certificate %s is not a PEM certificate", remote, path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("incus remote %q: the pinned server certificate %s: %w", remote, path, err)
	}
	return cert, nil
}

// checkProject refuses a project name that cannot be a query value of its own.
func checkProject(p string) error {
	if strings.ContainsAny(p, "/?#%\\ \t\n") || p == "." || p == ".." {
		return fmt.Errorf("project name %q is not valid", p)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// reason is why a file could not be read, without its path.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, fs.ErrNotExist) {
			return "missing"
		}
		return pe.Err.Error()
	}
	return err.Error()
}
