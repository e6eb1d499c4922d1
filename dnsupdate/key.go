package dnsupdate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/miekg/dns"

	"github.com/switchyard-nix/switchyard/redact"
)

// Key is a TSIG key. Its secret never leaves the package: every way of printing
// a Key shows only its name and algorithm.
type Key struct {
	Name      string // FQDN, lower case, with the trailing dot
	Algorithm string // miekg's algorithm name, e.g. dns.HmacSHA256 ("hmac-sha256.")
	secret    string // base64
}

// algorithms maps the key-file algorithm names to miekg's: every HMAC-SHA one.
var algorithms = map[string]string{
	"hmac-sha1":   dns.HmacSHA1,
	"hmac-sha224": dns.HmacSHA224,
	"hmac-sha256": dns.HmacSHA256,
	"hmac-sha384": dns.HmacSHA384,
	"hmac-sha512": dns.HmacSHA512,
}

// Algorithms lists the supported algorithm names as key files spell them.
func Algorithms() []string {
	return []string{"hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512"}
}

// NewKey makes a key from its name, algorithm (key-file spelling, e.g.
// "hmac-sha256", or miekg's) and base64 secret.
func NewKey(name, algorithm, secret string) (Key, error) {
	if name == "" {
		return Key{}, errors.New("TSIG key without a name")
	}
	if _, ok := dns.IsDomainName(name); !ok {
		return Key{}, errors.New("TSIG key name is not a domain name")
	}
	a := strings.TrimSuffix(strings.ToLower(algorithm), ".")
	alg, ok := algorithms[a]
	if !ok {
		return Key{}, fmt.Errorf("TSIG key %s: algorithm not supported (only %s)", name, strings.Join(Algorithms(), ", "))
	}
	raw, err := base64.StdEncoding.DecodeString(secret)
	if err != nil || len(raw) == 0 {
		// The decoding error would quote part of the secret.
		return Key{}, fmt.Errorf("TSIG key %s: the secret is not valid base64", name)
	}
	return Key{Name: dns.Fqdn(strings.ToLower(name)), Algorithm: alg, secret: secret}, nil
}

// String names the key, never its secret.
func (k Key) String() string {
	if k.Name == "" {
		return "no TSIG key"
	}
	return "TSIG key " + k.Name + " (" + strings.TrimSuffix(k.Algorithm, ".") + ")"
}

// GoString is String: %#v must not show the secret either.
func (k Key) GoString() string { return k.String() }

// Format prints String for every verb, so that no verb (%d, %x, ...) reaches
// the secret field through reflection.
func (k Key) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(k.String())) }

// Valid says whether the key has a name, an algorithm and a secret.
func (k Key) Valid() bool { return k.Name != "" && k.Algorithm != "" && k.secret != "" }

// ReadKeyFile reads a TSIG key in BIND's key-file format, as tsig-keygen writes it:
//
//	key "name" { algorithm hmac-sha256; secret "base64"; };
//
// Comments (#, //, /* */) are allowed; the file holds exactly one key. Errors
// name the line, never the file's path or any of its content (SPEC 6.9: the file is
// a credential). The secret read is added to redact.Default, so that no output
// relayed through it shows the secret.
func ReadKeyFile(path string) (Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is a credential location: not in errors
		}
		return Key{}, fmt.Errorf("read TSIG key file: %w", err)
	}
	k, err := parseKeyFile(string(b))
	if err != nil {
		return Key{}, fmt.Errorf("TSIG key file: %w", err)
	}
	redact.Default.Add(k.secret)
	return k, nil
}

// keyFormat is the key-file format, as errors describe it.
const keyFormat = `key "name" { algorithm hmac-sha256; secret "base64"; };`

// parseKeyFile parses the key-file text. Its errors name a line and what the format
// wants there, never a word of the text.
func parseKeyFile(text string) (Key, error) {
	toks, err := tokenize(text)
	if err != nil {
		return Key{}, err
	}
	var keys []Key
	p := &tokens{toks: toks}
	for !p.done() {
		keyTok := p.next()
		if keyTok.text != "key" || keyTok.quoted {
			return Key{}, fmt.Errorf("line %d: expected \"key\" (the file holds one key: %s)", keyTok.line, keyFormat)
		}
		if len(keys) > 0 {
			return Key{}, fmt.Errorf("line %d: a second key: the file holds one", keyTok.line)
		}
		nameTok := p.next()
		if nameTok.eof || nameTok.text == "" || (!nameTok.quoted && strings.ContainsAny(nameTok.text, "{};")) {
			return Key{}, fmt.Errorf("line %d: key without a name", nameTok.line)
		}
		if _, ok := dns.IsDomainName(nameTok.text); !ok {
			return Key{}, fmt.Errorf("line %d: the key's name is not a domain name", nameTok.line)
		}
		if err := p.expect("{"); err != nil {
			return Key{}, err
		}
		var alg, secret token
		var haveAlg, haveSecret bool
		for {
			t := p.next()
			if t.text == "}" && !t.quoted {
				break
			}
			if t.eof {
				return Key{}, fmt.Errorf("line %d: the key has no closing \"}\"", t.line)
			}
			v := p.next()
			if v.eof || (!v.quoted && (v.text == ";" || v.text == "}")) {
				return Key{}, fmt.Errorf("line %d: a statement without a value", t.line)
			}
			switch {
			case t.quoted:
				return Key{}, fmt.Errorf("line %d: expected algorithm or secret, found a quoted string", t.line)
			case t.text == "algorithm":
				alg, haveAlg = v, true
			case t.text == "secret":
				if !v.quoted {
					return Key{}, fmt.Errorf("line %d: the secret is not quoted", v.line)
				}
				secret, haveSecret = v, true
			default:
				return Key{}, fmt.Errorf("line %d: a statement other than algorithm and secret", t.line)
			}
			if err := p.expect(";"); err != nil {
				return Key{}, err
			}
		}
		if err := p.expect(";"); err != nil {
			return Key{}, err
		}
		if !haveAlg {
			return Key{}, fmt.Errorf("line %d: the key has no algorithm", keyTok.line)
		}
		if !haveSecret {
			return Key{}, fmt.Errorf("line %d: the key has no secret", keyTok.line)
		}
		if _, ok := algorithms[strings.TrimSuffix(strings.ToLower(alg.text), ".")]; !ok {
			return Key{}, fmt.Errorf("line %d: algorithm not supported (only %s)", alg.line, strings.Join(Algorithms(), ", "))
		}
		k, err := NewKey(nameTok.text, alg.text, secret.text)
		if err != nil {
			// Only the secret is left to be wrong; NewKey's error names the key.
			return Key{}, fmt.Errorf("line %d: the secret is not valid base64", secret.line)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return Key{}, fmt.Errorf("line %d: no key (the file holds one: %s)", max(1, p.lastLine()), keyFormat)
	}
	return keys[0], nil
}

type token struct {
	text   string
	quoted bool
	eof    bool
	line   int
}

// show names a token in an error by its kind: a credential's words are never
// shown.
func (t token) show() string {
	switch {
	case t.eof:
		return "the end of the file"
	case t.quoted:
		return "a quoted string"
	case t.text == "{" || t.text == "}" || t.text == ";":
		return fmt.Sprintf("%q", t.text)
	}
	return "a word"
}

type tokens struct {
	toks []token
	i    int
}

func (p *tokens) done() bool { return p.i >= len(p.toks) }

// lastLine is the line of the last token, 0 when there is none.
func (p *tokens) lastLine() int {
	if len(p.toks) == 0 {
		return 0
	}
	return p.toks[len(p.toks)-1].line
}

func (p *tokens) next() token {
	if p.done() {
		line := 0
		if len(p.toks) > 0 {
			line = p.toks[len(p.toks)-1].line
		}
		return token{eof: true, line: line}
	}
	t := p.toks[p.i]
	p.i++
	return t
}

func (p *tokens) expect(s string) error {
	t := p.next()
	if t.text != s || t.quoted {
		return fmt.Errorf("line %d: expected %q, found %s", t.line, s, t.show())
	}
	return nil
}

// tokenize splits BIND configuration text into words, quoted strings, braces
// and semicolons, dropping comments.
func tokenize(s string) ([]token, error) {
	var out []token
	line := 1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#' || (c == '/' && i+1 < len(s) && s[i+1] == '/'):
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(s[i:i+2+end], "\n")
			i += end + 4
		case c == '{' || c == '}' || c == ';':
			out = append(out, token{text: string(c), line: line})
			i++
		case c == '"':
			end := strings.IndexAny(s[i+1:], "\"\n")
			if end < 0 || s[i+1+end] != '"' {
				return nil, fmt.Errorf("line %d: unterminated quoted string", line)
			}
			out = append(out, token{text: s[i+1 : i+1+end], quoted: true, line: line})
			i += end + 2
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n{};\"#", rune(s[j])) && !strings.HasPrefix(s[j:], "//") && !strings.HasPrefix(s[j:], "/*") {
				j++
			}
			out = append(out, token{text: s[i:j], line: line})
			i = j
		}
	}
	return out, nil
}

// provider is the TSIG secret map miekg's client wants.
func (k Key) secrets() map[string]string { return map[string]string{k.Name: k.secret} }
