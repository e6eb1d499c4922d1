package spire

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	credredact "github.com/switchyard-nix/switchyard/redact"
)

// SPEC 6.9: a token file that does not parse is refused naming spireTokenFile and
// the line, never its content; the token read goes to credredact.Default.
func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		p := filepath.Join(dir, "secret-path")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const m = "MARKERtoken"
	for _, c := range []struct {
		text string
		line int
	}{
		{"", 1},
		{"\n\n", 1},
		{m + "\n" + m + "\n", 2},
		{"\n" + m + " " + m + "\n", 2},
		{m + "\x01\n", 1},
	} {
		_, err := ReadTokenFile(write(c.text))
		if err == nil {
			t.Errorf("%q: no error", c.text)
			continue
		}
		if strings.Contains(err.Error(), "MARKER") || strings.Contains(err.Error(), "secret-path") {
			t.Errorf("%q: the error shows the content or the path: %v", c.text, err)
		}
		if want := fmt.Sprintf("spireTokenFile: line %d: ", c.line); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %q, want it to start with %q", c.text, err, want)
		}
	}
	tok, err := ReadTokenFile(write("\n  MARKER-valid-token-1234 \n\n"))
	if err != nil || tok != "MARKER-valid-token-1234" {
		t.Fatalf("token %q, %v", tok, err)
	}
	if got := credredact.Default.String("token MARKER-valid-token-1234"); strings.Contains(got, "MARKER") {
		t.Errorf("not redacted: %q", got)
	}
	if _, err := ReadTokenFile(filepath.Join(dir, "secret-path-missing")); err == nil || strings.Contains(err.Error(), "secret-path") {
		t.Errorf("missing file: %v", err)
	}
}
