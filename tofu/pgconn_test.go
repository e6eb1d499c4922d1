package tofu

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/redact"
)

// SPEC 6.9: a connection string the pg backend would refuse quoting a part of it
// is refused naming pgConnStringFile and the line, never a part of it.
func TestReadConnStringRefusals(t *testing.T) {
	const m = "MARKERpg"
	for _, c := range []struct {
		text string
		line int
	}{
		{"", 1},
		{m + " host=/run/postgresql sslmode=disable\n", 1},
		{"host=/run/postgresql\n" + m + "\n", 2},
		{"\n\nhost=/run/postgresql " + m + "\n", 3},
		{"postgres://user:" + m + "@127.0.0.1:port/postgres\n", 1},
		{"postgres://user:pw@host/db\n" + m + "\n", 2},
		{"host=/run/postgresql password='" + m + "\n", 1},
		{"host=/run/postgresql\n  sslmode=" + m + "\n", 2},
		{"host=/run/postgresql port=" + m + "\n", 1},
		{"host=/run/postgresql connect_timeout=" + m + "\n", 1},
		{"host=/run/postgresql " + m + "=1\n", 1},
		{"postgres://h/db?" + m + "=1\n", 1},
		{"postgres://h/db?sslmode=" + m + "\n", 1},
		{m + "://user@host/db\n", 1},
		{"password=" + m + "\\", 1},
	} {
		p := filepath.Join(t.TempDir(), "secret-path")
		if err := os.WriteFile(p, []byte(c.text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadConnString(p)
		if err == nil {
			t.Errorf("%q: no error", c.text)
			continue
		}
		if strings.Contains(err.Error(), "MARKER") || strings.Contains(err.Error(), "secret-path") || strings.Contains(err.Error(), "/run/postgresql") {
			t.Errorf("%q: the error shows the file's content or path: %v", c.text, err)
		}
		if want := fmt.Sprintf("pgConnStringFile: line %d: ", c.line); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %q, want it to start with %q", c.text, err, want)
		}
	}
	if _, err := ReadConnString(filepath.Join(t.TempDir(), "secret-path")); err == nil || strings.Contains(err.Error(), "secret-path") {
		t.Errorf("a missing file: %v", err)
	}
}

func TestConnStringsTaken(t *testing.T) {
	for _, s := range []string{
		"postgres:///postgres?host=/tmp/sock&user=postgres&sslmode=disable",
		"postgresql://alice:pw%20x@db.example:5432/state?sslmode=verify-full&connect_timeout=10",
		"host=/tmp/sock user=postgres dbname=switchyard sslmode=disable",
		"host = db.example\n  password='it\\'s quoted' application_name=switchyard",
		"dbname=",
	} {
		if err := CheckConnString(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestConnStringSecretsRedacted(t *testing.T) {
	if err := CheckConnString("host=/tmp/sock password=MARKER-pg-password user=postgres"); err != nil {
		t.Fatal(err)
	}
	if err := CheckConnString("postgres://u:MARKER-url-password@db.example/state"); err != nil {
		t.Fatal(err)
	}
	got := redact.Default.String("pq: MARKER-pg-password MARKER-url-password user postgres")
	if strings.Contains(got, "MARKER") || !strings.Contains(got, "user postgres") {
		t.Errorf("got %q", got)
	}
}
