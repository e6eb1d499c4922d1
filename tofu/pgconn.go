package tofu

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"unicode"

	"github.com/switchyard-nix/switchyard/redact"
)

// connSetting is the credential setting holding the pg backend's connection string.
const connSetting = "pgConnStringFile"

// ReadConnString reads the pgConnStringFile credential: a PostgreSQL connection
// string, as the pg backend (lib/pq) takes it: key=value pairs (values optionally
// 'quoted'), or a postgres:// or postgresql:// URL. It is checked (CheckConnString,
// lines counted from the file's first) and its password and the string itself go to
// redact.Default. Errors name the setting and the line, never the path or any of the
// file's content (SPEC 6.9).
func ReadConnString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is a credential location: not in errors
		}
		return "", fmt.Errorf("%s: cannot be read: %w", connSetting, err)
	}
	text := string(b)
	trimmed := strings.TrimSpace(text)
	lead := text[:len(text)-len(strings.TrimLeftFunc(text, unicode.IsSpace))]
	first := 1 + strings.Count(lead, "\n")
	if err := checkConnString(trimmed, first); err != nil {
		return "", err
	}
	return trimmed, nil
}

// CheckConnString checks a connection string as ReadConnString does, its lines
// counted from its own first, and adds its password and itself to redact.Default.
// A string the pg backend would refuse quoting a part of it (lib/pq's parse errors,
// an unknown sslmode, a port or timeout that is no number, a parameter the server
// would refuse by name) is refused here, so OpenTofu never sees it.
func CheckConnString(s string) error { return checkConnString(s, 1) }

// connKeys are the parameters taken: libpq's connection keywords, lib/pq's own
// settings, and the run-time parameters commonly given in a connection string. Any
// other key lib/pq would send to the server as a run-time parameter, whose refusal
// names it.
var connKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`host hostaddr port dbname user password passfile channel_binding
		connect_timeout client_encoding options application_name fallback_application_name keepalives
		keepalives_idle keepalives_interval keepalives_count tcp_user_timeout replication gssencmode
		sslmode requiressl sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl
		sslcrldir sslsni requirepeer ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib
		gssdelegation service target_session_attrs load_balance_hosts
		sslinline binary_parameters disable_prepared_binary_result krbspn
		search_path timezone datestyle statement_timeout lock_timeout idle_in_transaction_session_timeout`) {
		connKeys[k] = true
	}
}

// sslModes are the sslmode values lib/pq takes (OpenTofu 1.10's, v1.10.3).
var sslModes = map[string]bool{"disable": true, "require": true, "verify-ca": true, "verify-full": true}

func checkConnString(s string, first int) error {
	fail := func(offset int, format string, a ...any) error {
		line := first + strings.Count(s[:offset], "\n")
		return fmt.Errorf("%s: line %d: %s", connSetting, line, fmt.Sprintf(format, a...))
	}
	if strings.TrimSpace(s) == "" {
		return fail(0, "no connection string")
	}
	params := map[string]string{}
	type at struct{ key, val int }
	where := map[string]at{}
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			return fail(i+1, "more after the URL (a connection URL is one line)")
		}
		u, err := url.Parse(s)
		if err != nil {
			// url's errors quote the URL.
			return fail(0, "not a valid postgres:// URL")
		}
		if u.User != nil {
			params["user"] = u.User.Username()
			if pw, ok := u.User.Password(); ok {
				params["password"] = pw
			}
		}
		if u.Port() != "" {
			params["port"] = u.Port()
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return fail(0, "the URL's query is not valid")
		}
		for k := range q {
			params[k] = q.Get(k)
		}
		for k := range params {
			where[k] = at{}
		}
	} else {
		rs := []rune(s)
		off := func(i int) int { return len(string(rs[:i])) }
		for i := 0; ; {
			for i < len(rs) && unicode.IsSpace(rs[i]) {
				i++
			}
			if i >= len(rs) {
				break
			}
			kstart := i
			for i < len(rs) && !unicode.IsSpace(rs[i]) && rs[i] != '=' {
				i++
			}
			key := string(rs[kstart:i])
			for i < len(rs) && rs[i] != '=' && unicode.IsSpace(rs[i]) {
				i++
			}
			if i >= len(rs) || rs[i] != '=' {
				return fail(off(kstart), `a word without "=" (want key=value pairs, or a postgres:// URL)`)
			}
			i++
			for i < len(rs) && unicode.IsSpace(rs[i]) {
				i++
			}
			vstart := i
			var val []rune
			if i < len(rs) && rs[i] == '\'' {
				for i++; ; i++ {
					if i >= len(rs) {
						return fail(off(vstart), "a quoted value without its closing quote")
					}
					if rs[i] == '\'' {
						i++
						break
					}
					if rs[i] == '\\' {
						i++
						if i >= len(rs) {
							return fail(off(vstart), "a quoted value without its closing quote")
						}
					}
					val = append(val, rs[i])
				}
			} else {
				for i < len(rs) && !unicode.IsSpace(rs[i]) {
					if rs[i] == '\\' {
						i++
						if i >= len(rs) {
							return fail(off(vstart), "a backslash at the end of a value")
						}
					}
					val = append(val, rs[i])
					i++
				}
			}
			params[key] = string(val)
			where[key] = at{off(kstart), off(vstart)}
		}
	}
	for k, v := range params {
		w := where[k]
		switch {
		case !connKeys[k]:
			return fail(w.key, "a parameter the PostgreSQL client does not know")
		case k == "sslmode" && !sslModes[v]:
			return fail(w.val, "sslmode must be one of disable, require, verify-ca, verify-full")
		case k == "port" && v != "":
			if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 65535 {
				return fail(w.val, "the port is not a number from 1 to 65535")
			}
		case k == "connect_timeout" && v != "":
			if _, err := strconv.Atoi(v); err != nil {
				return fail(w.val, "connect_timeout is not a number of seconds")
			}
		}
	}
	redact.Default.Add(params["password"], s)
	return nil
}
