package ssh

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kevinburke/ssh_config"
)

// defaultSSHConfigSubpath is the user's ssh_config(5) file under the home directory.
const defaultSSHConfigSubpath = ".ssh/config"

// NoSSHConfig as Config.SSHConfigFile reads no ssh_config file (like ssh -F none).
const NoSSHConfig = "none"

// maxJumps bounds a ProxyJump chain (with the first hop's own ProxyJump).
const maxJumps = 8

// sshConfig is a parsed ssh_config(5) file; nil reads nothing.
type sshConfig struct {
	file string
	cfg  *ssh_config.Config
}

// loadSSHConfig reads file; "" is ~/.ssh/config, which may be missing. A file
// given explicitly must exist.
func loadSSHConfig(file string) (*sshConfig, error) {
	explicit := file != ""
	if file == NoSSHConfig {
		return nil, nil
	}
	if !explicit {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, nil
		}
		file = filepath.Join(home, defaultSSHConfigSubpath)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !explicit {
			return nil, nil
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &configError{file: file, err: err}
	}
	cfg, err := ssh_config.DecodeBytes(data)
	if err != nil {
		return nil, &configError{file: file, err: err}
	}
	return &sshConfig{file: file, cfg: cfg}, nil
}

// configError is an error that names the ssh config file it is about, so a
// caller adding that file's name can tell, by type, that it is already there.
type configError struct {
	file string
	err  error
}

func (e *configError) Error() string { return "ssh config " + e.file + ": " + e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// wrap marks err as being about the ssh config file; without a file (c nil) it
// is err as it is.
func (c *sshConfig) wrap(err error) error {
	if c == nil {
		return err
	}
	return &configError{file: c.file, err: err}
}

// get is the first value of key for the host alias, "" when none.
func (c *sshConfig) get(alias, key string) (string, error) {
	if c == nil {
		return "", nil
	}
	v, err := c.cfg.Get(alias, key)
	if err != nil {
		return "", c.wrap(fmt.Errorf("%s for %s: %v", key, alias, err))
	}
	return strings.TrimSpace(v), nil
}

func (c *sshConfig) getAll(alias, key string) ([]string, error) {
	if c == nil {
		return nil, nil
	}
	vs, err := c.cfg.GetAll(alias, key)
	if err != nil {
		return nil, c.wrap(fmt.Errorf("%s for %s: %v", key, alias, err))
	}
	var out []string
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out, nil
}

// endpoint is where one SSH connection of a chain goes: the node or a jump host.
type endpoint struct {
	alias    string // the name as given (what Host patterns match)
	user     string
	host     string // the real host name or address (HostName)
	port     int
	keyFiles []string // IdentityFile entries, expanded; they may not exist
	jump     string   // ProxyJump as configured, "" for none
}

// resolve applies the ssh config to alias: what is already set in e (from flags
// or the ProxyJump spec) wins; the config fills the rest; defaultUser and 22
// fill what is still missing.
func (c *sshConfig) resolve(e endpoint, defaultUser string) (endpoint, error) {
	alias := e.alias
	where := func(key string) string {
		if c == nil {
			return key
		}
		return key + " of " + alias
	}
	hostName, err := c.get(alias, "HostName")
	if err != nil {
		return e, err
	}
	e.host = alias
	if hostName != "" {
		h, err := expandTokens(hostName, map[byte]string{'h': alias})
		if err != nil {
			return e, c.wrap(fmt.Errorf("%s: %v", where("HostName"), err))
		}
		if err := checkHost(h); err != nil {
			return e, c.wrap(fmt.Errorf("%s: %v", where("HostName"), err))
		}
		e.host = h
	}
	if e.port == 0 {
		p, err := c.get(alias, "Port")
		if err != nil {
			return e, err
		}
		if p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				return e, c.wrap(fmt.Errorf("%s: %q is not a port", where("Port"), p))
			}
			e.port = n
		}
	}
	if e.port == 0 {
		e.port = DefaultPort
	}
	if e.user == "" {
		u, err := c.get(alias, "User")
		if err != nil {
			return e, err
		}
		if u != "" {
			u, err = expandTokens(u, map[byte]string{'u': localUser(), '%': "%"})
			if err != nil {
				return e, c.wrap(fmt.Errorf("%s: %v", where("User"), err))
			}
			if err := checkUser(u); err != nil {
				return e, c.wrap(fmt.Errorf("%s: %v", where("User"), err))
			}
			e.user = u
		}
	}
	if e.user == "" {
		e.user = defaultUser
	}
	ids, err := c.getAll(alias, "IdentityFile")
	if err != nil {
		return e, err
	}
	home, _ := os.UserHomeDir()
	for _, id := range ids {
		if strings.EqualFold(id, "none") {
			continue
		}
		f, err := expandTokens(id, map[byte]string{
			'd': home, 'h': e.host, 'n': alias, 'p': strconv.Itoa(e.port), 'r': e.user, 'u': localUser(), 'l': localHost(),
		})
		if err != nil {
			// A key's path is a credential path: never name it.
			return e, c.wrap(fmt.Errorf("%s: a %%-token that is not supported here", where("IdentityFile")))
		}
		if f == "~" || strings.HasPrefix(f, "~/") {
			f = filepath.Join(home, f[1:])
		}
		e.keyFiles = append(e.keyFiles, f)
	}
	if e.jump, err = c.get(alias, "ProxyJump"); err != nil {
		return e, err
	}
	return e, nil
}

// expandTokens replaces ssh_config's %x tokens; %% is always a '%'.
func expandTokens(s string, tokens map[byte]string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf("%q ends in '%%'", s)
		}
		i++
		if s[i] == '%' {
			b.WriteByte('%')
			continue
		}
		v, ok := tokens[s[i]]
		if !ok {
			return "", fmt.Errorf("%q: token %%%c is not supported here", s, s[i])
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// parseProxyJump splits a ProxyJump value: "none", or comma-separated hops
// "[user@]host[:port]" or "ssh://[user@]host[:port]".
func parseProxyJump(spec string) ([]endpoint, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || strings.EqualFold(spec, "none") {
		return nil, nil
	}
	var hops []endpoint
	for _, h := range strings.Split(spec, ",") {
		h = strings.TrimSpace(h)
		h = strings.TrimSuffix(strings.TrimPrefix(h, "ssh://"), "/")
		u, host, port, err := ParseTarget(h)
		if err != nil {
			return nil, fmt.Errorf("ProxyJump %q: %v", spec, err)
		}
		hops = append(hops, endpoint{alias: host, user: u, port: port})
	}
	return hops, nil
}

// jumpChain resolves the jump hosts in front of a node whose ProxyJump is spec:
// each hop through the ssh config, and the first hop's own ProxyJump in front
// of it (as ssh(1) does). Jump hosts default to the local user, as in ssh(1).
func (c *sshConfig) jumpChain(spec string) ([]endpoint, error) {
	hops, err := parseProxyJump(spec)
	if err != nil {
		return nil, err
	}
	var chain []endpoint
	for len(hops) > 0 {
		if len(chain)+len(hops) > maxJumps {
			err := fmt.Errorf("ProxyJump: more than %d jump hosts (a loop?)", maxJumps)
			return nil, c.wrap(err)
		}
		resolved := make([]endpoint, len(hops))
		for i, h := range hops {
			if resolved[i], err = c.resolve(h, localUser()); err != nil {
				return nil, err
			}
		}
		chain = append(resolved, chain...)
		// Only the first hop's own ProxyJump applies: ssh(1) reaches the later
		// hops through the earlier ones, overriding theirs.
		if hops, err = parseProxyJump(resolved[0].jump); err != nil {
			return nil, c.wrap(fmt.Errorf("jump host %s: %v", resolved[0].alias, err))
		}
	}
	return chain, nil
}

// localUser is the name of the user running switchyard, as ssh(1) uses it for
// %u and for a jump host without a user.
func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return DefaultUser
}

func localHost() string {
	h, _ := os.Hostname()
	return h
}
