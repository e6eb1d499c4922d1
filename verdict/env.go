package verdict

import (
	"strconv"
	"strings"
)

// splitEnvironment splits systemd's rendering of Environment= into its
// assignments. systemctl show joins them with spaces and shell-quotes the ones that
// need it: "A=b c", "Q=x\"y", "P=\$x", and C escapes for control characters
// ("N=a\tb" is a real tab, checked against systemd 252). A plain split on spaces would
// cut a value with a space in it and could invent a DEPLOY_LOOP_BUDGET. nil when empty.
func splitEnvironment(v string) []string {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '"':
			inWord = true
			i = unescape(v, i+1, '"', &cur)
		case c == '\'':
			inWord = true
			for i++; i < len(v) && v[i] != '\''; i++ {
				cur.WriteByte(v[i])
			}
		case c == '$' && i+1 < len(v) && v[i+1] == '\'':
			inWord = true
			i = unescape(v, i+2, '\'', &cur)
		case c == '\\' && i+1 < len(v):
			inWord = true
			i++
			cur.WriteByte(v[i])
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

// unescape decodes a quoted body with C escapes starting at i and returns the
// index of its closing quote.
func unescape(v string, i int, quote byte, cur *strings.Builder) int {
	for ; i < len(v) && v[i] != quote; i++ {
		if v[i] != '\\' || i+1 >= len(v) {
			cur.WriteByte(v[i])
			continue
		}
		i++
		switch v[i] {
		case 'n':
			cur.WriteByte('\n')
		case 't':
			cur.WriteByte('\t')
		case 'r':
			cur.WriteByte('\r')
		case 'a':
			cur.WriteByte('\a')
		case 'b':
			cur.WriteByte('\b')
		case 'f':
			cur.WriteByte('\f')
		case 'v':
			cur.WriteByte('\v')
		case 'x':
			if i+2 < len(v) {
				if b, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
					cur.WriteByte(byte(b))
					i += 2
					continue
				}
			}
			cur.WriteByte('x')
		default:
			cur.WriteByte(v[i])
		}
	}
	return i
}

// envValue is the value of key in a unit's environment; the last assignment wins,
// as in systemd.
func envValue(env []string, key string) (string, bool) {
	val, found := "", false
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			val, found = v, true
		}
	}
	return val, found
}
