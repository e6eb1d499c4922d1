package ssh

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"unicode"
)

// ParseTarget splits an ssh target "[user@]host[:port]"; an IPv6 address with a
// port is written in brackets ("[2001:db8::1]:2222"), without one it may stand
// bare. user is "" and port 0 when s does not give them (New applies the
// defaults, root and 22).
func ParseTarget(s string) (user, host string, port int, err error) {
	rest := s
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		user, rest = rest[:i], rest[i+1:]
		if user == "" {
			return "", "", 0, fmt.Errorf("ssh target %q: empty user", s)
		}
		if err := checkUser(user); err != nil {
			return "", "", 0, fmt.Errorf("ssh target %q: %v", s, err)
		}
	}
	portStr := ""
	switch {
	case strings.HasPrefix(rest, "["):
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return "", "", 0, fmt.Errorf("ssh target %q: missing ']'", s)
		}
		host, rest = rest[1:end], rest[end+1:]
		if ip := net.ParseIP(host); ip == nil || !strings.Contains(host, ":") {
			return "", "", 0, fmt.Errorf("ssh target %q: %q in brackets is not an IPv6 address", s, host)
		}
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return "", "", 0, fmt.Errorf("ssh target %q: unexpected %q after ']'", s, rest)
			}
			portStr = rest[1:]
			if portStr == "" {
				return "", "", 0, fmt.Errorf("ssh target %q: empty port", s)
			}
		}
	case strings.Count(rest, ":") > 1:
		// A bare IPv6 address: it cannot carry a port.
		if net.ParseIP(rest) == nil {
			return "", "", 0, fmt.Errorf("ssh target %q: write an IPv6 address with a port as [addr]:port", s)
		}
		host = rest
	default:
		var hasPort bool
		host, portStr, hasPort = strings.Cut(rest, ":")
		if hasPort && portStr == "" {
			return "", "", 0, fmt.Errorf("ssh target %q: empty port", s)
		}
	}
	if err := checkHost(host); err != nil {
		return "", "", 0, fmt.Errorf("ssh target %q: %v", s, err)
	}
	if portStr != "" {
		p, perr := strconv.Atoi(portStr)
		if perr != nil || p < 1 || p > 65535 || strings.HasPrefix(portStr, "+") {
			return "", "", 0, fmt.Errorf("ssh target %q: port %q is not a number from 1 to 65535", s, portStr)
		}
		port = p
	}
	return user, host, port, nil
}

// checkUser refuses user names that ssh(1) would misread: empty, an option, or
// with separators.
func checkUser(user string) error {
	if user == "" {
		return fmt.Errorf("empty user")
	}
	if strings.HasPrefix(user, "-") {
		return fmt.Errorf("user %q starts with '-'", user)
	}
	if strings.IndexFunc(user, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '@' || r == ':' }) >= 0 {
		return fmt.Errorf("user %q holds a space, control character, '@' or ':'", user)
	}
	return nil
}

// checkHost refuses host names that ssh(1) would misread.
func checkHost(host string) error {
	if host == "" {
		return fmt.Errorf("empty host")
	}
	if strings.HasPrefix(host, "-") {
		return fmt.Errorf("host %q starts with '-'", host)
	}
	if strings.IndexFunc(host, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune("@/[]\\'\"`$;&|<>(){}*?!#,", r)
	}) >= 0 {
		return fmt.Errorf("host %q holds a character no host name has", host)
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return fmt.Errorf("host %q holds ':' but is not an IPv6 address", host)
	}
	return nil
}
