package data

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Canonical encodes data as canonical JSON: object keys sorted by their UTF-8 bytes
// (Unicode code point order), no whitespace, strings with the fewest escapes (", \ and
// control characters; never HTML escapes), integers in plain decimal, other numbers in
// Go's shortest round-trip form that always keeps a "." or an exponent (so a float stays
// a float for Nix), RepoPath as {"_repoPath":"..."}. Equal data gives equal bytes.
//
// Besides the data types (nil, bool, string, json.Number, []any, map[string]any,
// RepoPath) it takes int, int64, float64, []string and map[string]string. Anything else,
// invalid UTF-8 and non-finite numbers are refused: they are not data.
func Canonical(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := encode(&b, v, 0); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func encode(b *bytes.Buffer, v any, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("nested deeper than %d", MaxDepth)
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case string:
		return encodeString(b, t)
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case float64:
		s, err := formatFloat(t)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case json.Number:
		s, err := canonicalNumber(t)
		if err != nil {
			return err
		}
		b.WriteString(s)
	case RepoPath:
		b.WriteString(`{"` + RepoPathKey + `":`)
		if err := encodeString(b, string(t)); err != nil {
			return err
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encode(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case []string:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeString(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := encodeString(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := encode(b, t[k], depth+1); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		b.WriteByte('}')
	case map[string]string:
		m := make(map[string]any, len(t))
		for k, s := range t {
			m[k] = s
		}
		return encode(b, m, depth)
	default:
		return fmt.Errorf("not data: %T", v)
	}
	return nil
}

func encodeString(b *bytes.Buffer, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("not data: string %q is not UTF-8", s)
	}
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return nil
}

func canonicalNumber(n json.Number) (string, error) {
	k, err := NumberKind(n)
	if err != nil {
		return "", fmt.Errorf("not data: %w", err)
	}
	if k == Integer {
		i, _ := n.Int64()
		return strconv.FormatInt(i, 10), nil
	}
	f, _ := parseFiniteFloat(string(n))
	return formatFloat(f)
}

func formatFloat(f float64) (string, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "", fmt.Errorf("not data: number %v", f)
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s, nil
}
