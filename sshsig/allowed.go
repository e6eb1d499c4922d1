package sshsig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// Allowed is one line of an allowed_signers file (ssh-keygen(1), ALLOWED SIGNERS).
type Allowed struct {
	Principals []string // patterns, as written (wildcards * and ?, ! negates)
	Key        ssh.PublicKey
	Namespaces []string // patterns; empty: any namespace
	// ValidAfter and ValidBefore bound when the key may sign; zero: unbounded.
	ValidAfter, ValidBefore time.Time
	// CertAuthority marks a CA key: it allows certificates it signed. Parsed, never
	// matched (not built): Find refuses certificate keys.
	CertAuthority bool
}

// Errors of Find, each wrapped with its detail.
var (
	// ErrNotAllowed is a key that no line allows.
	ErrNotAllowed = errors.New("no allowed signer")
	// ErrNamespaceNotAllowed is a key whose lines allow other namespaces only.
	ErrNamespaceNotAllowed = errors.New("namespace not allowed for this signer")
	// ErrExpired is a key whose lines' valid-before has passed.
	ErrExpired = errors.New("expired")
	// ErrNotYetValid is a key whose lines' valid-after is still to come.
	ErrNotYetValid = errors.New("not yet valid")
	// ErrCertificate is a signature by a certificate: cert-authority lines are not built.
	ErrCertificate = errors.New("certificate signers (cert-authority) are not supported")
)

// ParseAllowedSigners reads an allowed_signers file: one signer a line,
// `principals [options] keytype base64-key [comment]`; blank lines and # comments are
// skipped. A malformed line, or an option OpenSSH does not know, is refused naming
// its line, as ssh-keygen does.
func ParseAllowedSigners(r io.Reader) ([]Allowed, error) {
	var out []Allowed
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		a, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("allowed signers line %d: %w", n, err)
		}
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading allowed signers: %w", err)
	}
	return out, nil
}

func parseLine(line string) (Allowed, error) {
	principals, rest, err := firstField(line)
	if err != nil {
		return Allowed{}, err
	}
	var a Allowed
	for _, p := range strings.Split(principals, ",") {
		if p == "" {
			return Allowed{}, fmt.Errorf("empty principal in %q", principals)
		}
		a.Principals = append(a.Principals, p)
	}
	// What follows the principals is authorized_keys syntax: options, then the key.
	key, _, opts, _, err := ssh.ParseAuthorizedKey([]byte(rest))
	if err != nil {
		return Allowed{}, fmt.Errorf("no key after the principals: %w", err)
	}
	a.Key = key
	for _, o := range opts {
		name, val, hasVal := strings.Cut(o, "=")
		switch strings.ToLower(name) {
		case "cert-authority":
			if hasVal {
				return Allowed{}, fmt.Errorf("option cert-authority takes no value")
			}
			a.CertAuthority = true
		case "namespaces":
			v, err := dequote(name, val, hasVal)
			if err != nil {
				return Allowed{}, err
			}
			a.Namespaces = strings.Split(v, ",")
		case "valid-after", "valid-before":
			v, err := dequote(name, val, hasVal)
			if err != nil {
				return Allowed{}, err
			}
			t, err := parseTime(v)
			if err != nil {
				return Allowed{}, fmt.Errorf("option %s: %w", name, err)
			}
			if strings.EqualFold(name, "valid-after") {
				a.ValidAfter = t
			} else {
				a.ValidBefore = t
			}
		default:
			return Allowed{}, fmt.Errorf("unsupported option %q", name)
		}
	}
	if !a.ValidAfter.IsZero() && !a.ValidBefore.IsZero() && !a.ValidBefore.After(a.ValidAfter) {
		return Allowed{}, fmt.Errorf("valid-before is not after valid-after")
	}
	return a, nil
}

// firstField splits off the first whitespace-delimited field; a field in double quotes
// may hold spaces (OpenSSH's strdelimw).
func firstField(line string) (field, rest string, err error) {
	if strings.HasPrefix(line, `"`) {
		end := strings.IndexByte(line[1:], '"')
		if end < 0 {
			return "", "", fmt.Errorf("principals: missing closing quote")
		}
		field, rest = line[1:1+end], line[2+end:]
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return "", "", fmt.Errorf("principals: text after the closing quote")
		}
	} else {
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			return "", "", fmt.Errorf("no key after the principals")
		}
		field, rest = line[:i], line[i:]
	}
	return field, strings.TrimSpace(rest), nil
}

// dequote is an option's value, which OpenSSH wants in double quotes.
func dequote(name, val string, hasVal bool) (string, error) {
	if !hasVal || len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return "", fmt.Errorf(`option %s wants a value in double quotes (%s="...")`, name, name)
	}
	return val[1 : len(val)-1], nil
}

// parseTime reads YYYYMMDD[HHMM[SS]][Z]: UTC with Z, else local time (ssh-keygen(1)).
func parseTime(s string) (time.Time, error) {
	loc := time.Local
	if v, ok := strings.CutSuffix(s, "Z"); ok {
		s, loc = v, time.UTC
	}
	layouts := map[int]string{8: "20060102", 12: "200601021504", 14: "20060102150405"}
	layout, ok := layouts[len(s)]
	if !ok {
		return time.Time{}, fmt.Errorf("%q is not YYYYMMDD[HHMM[SS]][Z]", s)
	}
	t, err := time.ParseInLocation(layout, s, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not YYYYMMDD[HHMM[SS]][Z]", s)
	}
	return t, nil
}

// Find is the signer that allowed says key is for namespace at now: the principals of
// the first line with this key whose namespaces= (if any) match namespace and whose
// valid-after/valid-before (if any) cover now, comma-joined as written. No such line:
// the error says why, the most telling first (ErrExpired or ErrNotYetValid, then
// ErrNamespaceNotAllowed, else ErrNotAllowed naming the key's fingerprint).
func Find(allowed []Allowed, key ssh.PublicKey, namespace string, now time.Time) (principal string, err error) {
	if _, ok := key.(*ssh.Certificate); ok {
		return "", ErrCertificate
	}
	want := key.Marshal()
	var nsErr, timeErr error
	for _, a := range allowed {
		if a.CertAuthority || !bytes.Equal(a.Key.Marshal(), want) {
			continue
		}
		if len(a.Namespaces) > 0 && !matchList(namespace, a.Namespaces) {
			nsErr = fmt.Errorf("%w: %q (the line allows %s)", ErrNamespaceNotAllowed, namespace, strings.Join(a.Namespaces, ","))
			continue
		}
		if !a.ValidAfter.IsZero() && now.Before(a.ValidAfter) {
			timeErr = fmt.Errorf("%w: valid after %s", ErrNotYetValid, a.ValidAfter.UTC().Format(time.RFC3339))
			continue
		}
		if !a.ValidBefore.IsZero() && now.After(a.ValidBefore) {
			timeErr = fmt.Errorf("%w: valid before %s", ErrExpired, a.ValidBefore.UTC().Format(time.RFC3339))
			continue
		}
		return strings.Join(a.Principals, ","), nil
	}
	switch {
	case timeErr != nil:
		return "", timeErr
	case nsErr != nil:
		return "", nsErr
	}
	return "", fmt.Errorf("%w for key %s", ErrNotAllowed, ssh.FingerprintSHA256(key))
}

// matchList is OpenSSH's match_pattern_list: a match of a negated pattern (!p) refuses,
// else any pattern matching accepts. Patterns take * and ?.
func matchList(s string, patterns []string) bool {
	ok := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		if !matchPattern(s, p) {
			continue
		}
		if neg {
			return false
		}
		ok = true
	}
	return ok
}

// matchPattern matches * and ? only: path.Match's [ and \ are escaped away.
func matchPattern(s, p string) bool {
	p = strings.NewReplacer(`\`, `\\`, `[`, `\[`).Replace(p)
	// path.Match's * stops at '/', OpenSSH's does not; map '/' to a byte neither has.
	const sep = "\x00"
	ok, err := path.Match(strings.ReplaceAll(p, "/", sep), strings.ReplaceAll(s, "/", sep))
	return err == nil && ok
}
