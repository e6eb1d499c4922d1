// Package redact keeps the content of the run's credential files (SPEC 6.9) out of
// every output. A Set holds what to redact: the secrets a credential reader found
// (Add: a TSIG key's secret, a connection string's password, a token), or, for a
// credential whose structure is not known, fragments of its whole content
// (AddContent: each line, each whitespace-separated field, and each run between
// punctuation). String, JSON, Error and a Writer replace each occurrence by Mark.
//
// The process has one Set, Default: the credential readers (dnsupdate.ReadKeyFile,
// tofu.ReadConnString, spire.ReadTokenFile) add what they read to it, tofu.Prepare
// adds the key files it hands OpenTofu's provider, and what OpenTofu prints passes
// through it on its way to a log or an event.
//
// Secrets shorter than MinLen are not redacted: such a string is a word any message
// may hold, and replacing it everywhere would garble every output.
package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
)

// Mark stands for a redacted fragment.
const Mark = "[redacted]"

// MinLen is the shortest fragment redacted: shorter ones are words any message
// may hold (a user name, a port).
const MinLen = 6

// maxRead bounds what is read of one credential file.
const maxRead = 1 << 20

// common are words of a credential file's format, not of its secret, which outputs
// may name: AddContent never takes them as fragments.
var common = map[string]bool{
	"algorithm": true, "secret": true, "hmac-sha1": true, "hmac-sha224": true, "hmac-sha256": true,
	"hmac-sha384": true, "hmac-sha512": true, "postgres": true, "postgresql": true, "sslmode": true,
	"disable": true, "require": true, "verify-full": true, "verify-ca": true, "localhost": true,
	"dbname": true, "password": true, "-----BEGIN": true, "-----END": true, "PRIVATE": true,
	"OPENSSH": true, "KEY-----": true, "CERTIFICATE-----": true, "127.0.0.1": true,
}

// Set is what to redact. The zero Set redacts nothing; a nil *Set neither. It is
// safe for concurrent use.
type Set struct {
	mu    sync.RWMutex
	frags []string // longest first, so a fragment inside a longer one does not split it
}

// Default is the process's Set.
var Default = &Set{}

// Add adds secrets, each as it is (trimmed of surrounding white space); those
// shorter than MinLen are left out.
func (s *Set) Add(secrets ...string) {
	var add []string
	for _, f := range secrets {
		if f = strings.TrimSpace(f); len(f) >= MinLen {
			add = append(add, f)
		}
	}
	s.add(add)
}

// AddContent adds the fragments of a credential's whole content: for a credential
// whose secret parts are not known (a file that does not parse, a key file read by
// another package). It redacts more than the secret: its non-secret words too.
func (s *Set) AddContent(content []byte) { s.add(fragments(string(content))) }

// AddFile adds the fragments of each credential file's content (AddContent); a file
// that cannot be read adds nothing (its reader reports that, naming its setting).
// Empty paths are skipped.
func (s *Set) AddFile(paths ...string) {
	for _, p := range paths {
		if p == "" {
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, maxRead))
		f.Close()
		s.AddContent(b)
	}
}

func (s *Set) add(add []string) {
	if s == nil || len(add) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range add {
		if !slices.Contains(s.frags, f) {
			s.frags = append(s.frags, f)
		}
	}
	slices.SortStableFunc(s.frags, func(a, b string) int { return len(b) - len(a) })
}

// String is str with every fragment replaced by Mark.
func (s *Set) String(str string) string {
	if s == nil {
		return str
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.frags {
		if strings.Contains(str, f) {
			str = strings.ReplaceAll(str, f, Mark)
		}
	}
	return str
}

// Error is err with its message redacted; nil stays nil. The error returned wraps
// err (errors.Is and errors.As see through it) but its message is the redacted one.
func (s *Set) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := s.String(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Is keeps errors.Is working through the redaction.
func (e *redacted) Is(target error) bool { return errors.Is(e.err, target) }

// JSON is a line of JSON with every fragment replaced by Mark inside its strings:
// a fragment is looked for as a JSON string encodes it (with and without the
// HTML escapes of encoding/json), which holds no bare quote, so a replacement never
// crosses a string's bounds. A fragment that is not valid UTF-8 is looked for as is.
func (s *Set) JSON(line []byte) []byte {
	if s == nil {
		return line
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, f := range s.frags {
		for _, enc := range jsonForms(f) {
			if bytes.Contains(line, enc) {
				line = bytes.ReplaceAll(line, enc, []byte(Mark))
			}
		}
	}
	return line
}

// jsonForms is how a JSON string may encode f: HTML-escaped (encoding/json's
// default), and not.
func jsonForms(f string) [][]byte {
	var out [][]byte
	for _, html := range []bool{true, false} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		if enc.Encode(f) != nil {
			continue
		}
		e := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		e = e[1 : len(e)-1]
		if len(e) > 0 && !slices.ContainsFunc(out, func(o []byte) bool { return bytes.Equal(o, e) }) {
			out = append(out, e)
		}
	}
	return out
}

// empty says whether the set redacts nothing.
func (s *Set) empty() bool {
	if s == nil {
		return true
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.frags) == 0
}

// cut is the largest position p <= max of b such that no fragment occurring in b
// spans p (starts before it and ends after it): b[:p] can be redacted on its own.
func (s *Set) cut(b []byte, max int) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p := max
	for moved := true; moved && p > 0; {
		moved = false
		for _, f := range s.frags {
			// An occurrence spanning p starts in (p-len(f), p).
			from := p - len(f) + 1
			if from < 0 {
				from = 0
			}
			end := p + len(f) - 1
			if end > len(b) {
				end = len(b)
			}
			if i := bytes.Index(b[from:end], []byte(f)); i >= 0 && from+i < p {
				p, moved = from+i, true
			}
		}
	}
	return p
}

// fragments is what of a content is redacted: each trimmed line, each
// whitespace-separated field, and each run between punctuation, of MinLen bytes
// or more and not a word of a credential format.
func fragments(content string) []string {
	var out []string
	keep := func(f string) {
		if len(f) >= MinLen && !common[f] && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, line := range strings.Split(content, "\n") {
		line = strings.TrimSpace(line)
		keep(line)
		for _, field := range strings.Fields(line) {
			keep(field)
			keep(strings.Trim(field, `"';,{}()[]<>`))
			for _, piece := range strings.FieldsFunc(field, isPunct) {
				keep(piece)
			}
		}
	}
	return out
}

// isPunct is a separator of a credential's parts: a conn string's
// "scheme://user:password@host/db?key=value&...", a key file's quotes and
// statements.
func isPunct(r rune) bool {
	return strings.ContainsRune(`:/@?&=;,"'{}()[]<>`+"`", r)
}
