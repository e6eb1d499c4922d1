package spire

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"unicode"

	credredact "github.com/switchyard-nix/switchyard/redact"
)

// tokenSetting is the credential setting holding a SPIRE registration token.
const tokenSetting = "spireTokenFile"

// maxToken bounds a token file: a join token is a UUID, an admin token a JWT.
const maxToken = 64 << 10

// ReadTokenFile reads the spireTokenFile credential: one token on one line (blank
// lines and surrounding white space aside), printable and without spaces. The token
// goes to credredact.Default. Errors name the setting and the line, never the path or
// any of the file's content (SPEC 6.9).
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is a credential location: not in errors
		}
		return "", fmt.Errorf("%s: cannot be read: %w", tokenSetting, err)
	}
	if len(b) > maxToken {
		return "", fmt.Errorf("%s: line 1: longer than %d bytes: not a token", tokenSetting, maxToken)
	}
	return parseToken(string(b))
}

func parseToken(text string) (string, error) {
	token, at := "", 0
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case token != "":
			return "", fmt.Errorf("%s: line %d: more than one line (the file holds one token, on line %d)", tokenSetting, i+1, at)
		case strings.IndexFunc(line, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
			return "", fmt.Errorf("%s: line %d: a token holds no spaces or control characters", tokenSetting, i+1)
		}
		token, at = line, i+1
	}
	if token == "" {
		return "", fmt.Errorf("%s: line 1: no token", tokenSetting)
	}
	credredact.Default.Add(token)
	return token, nil
}
