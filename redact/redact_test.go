package redact

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestStringRedactsLinesFieldsAndParts(t *testing.T) {
	var s Set
	s.AddContent([]byte("postgres://alice:MARKER-pw42@db.example:5432/state?sslmode=disable\n"))
	s.AddContent([]byte("key \"tenant.example.\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0LXNlY3JldA==\";\n};\n"))
	s.AddContent([]byte("root:*:20228:0:99999:7:::\n"))
	for _, in := range []string{
		`missing "=" after "postgres://alice:MARKER-pw42@db.example:5432/state?sslmode=disable" in connection info string`,
		`password MARKER-pw42 refused`,
		`secret c2VjcmV0LXNlY3JldA== is bad`,
		`found "root:*:20228:0:99999:7:::"`,
		`user alice at db.example`,
	} {
		out := s.String(in)
		for _, leak := range []string{"MARKER-pw42", "c2VjcmV0LXNlY3JldA", "20228:0", "db.example"} {
			if strings.Contains(out, leak) {
				t.Errorf("%q -> %q holds %q", in, out, leak)
			}
		}
		if !strings.Contains(out, Mark) {
			t.Errorf("%q -> %q: nothing redacted", in, out)
		}
	}
	// The format's own words and short parts are left alone.
	if got := s.String("algorithm hmac-sha256, sslmode disable, port 5432"); got != "algorithm hmac-sha256, sslmode disable, port 5432" {
		t.Errorf("format words redacted: %q", got)
	}
}

func TestEmptySetRedactsNothing(t *testing.T) {
	var s Set
	s.AddContent([]byte("short\n\n  \n"))
	s.Add("short", "  ")
	if got := s.String("short text"); got != "short text" {
		t.Errorf("got %q", got)
	}
	var nilSet *Set
	if got := nilSet.String("x"); got != "x" {
		t.Errorf("nil set: %q", got)
	}
}

func TestAddFileSkipsUnreadable(t *testing.T) {
	var s Set
	s.AddFile("", "/nonexistent/credential")
	if !s.empty() {
		t.Error("an unreadable file added fragments")
	}
	p := t.TempDir() + "/cred"
	writeFile(t, p, "MARKER-file-content\n")
	s.AddFile(p)
	if got := s.String("saw MARKER-file-content here"); got != "saw "+Mark+" here" {
		t.Errorf("got %q", got)
	}
}

func TestWriterRedactsAcrossWrites(t *testing.T) {
	var s Set
	s.Add("MARKER-split-secret")
	var out strings.Builder
	w := s.NewWriter(&out)
	for _, chunk := range []string{"error: MARKER-sp", "lit-secret quoted\nnext ", "line MARKER-split-", "secret"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(out.String(), "MARKER-sp") && !strings.Contains(out.String(), "\n") {
		t.Fatalf("partial fragment written: %q", out.String())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "error: " + Mark + " quoted\nnext line " + Mark
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestWriterWithoutFragmentsPassesThrough(t *testing.T) {
	var s Set
	var out strings.Builder
	w := s.NewWriter(&out)
	w.Write([]byte("prompt: "))
	if out.String() != "prompt: " {
		t.Errorf("held back without fragments: %q", out.String())
	}
}

func TestJSONRedactsInsideStrings(t *testing.T) {
	var s Set
	s.AddContent([]byte(`key "MARKER-<name>" { secret "MARKER-b64+/=="; };`))
	line := []byte(`{"kind":"log","msg":"found \"MARKER-\u003cname\u003e\" and MARKER-b64+/=="}` + "\n")
	got := string(s.JSON(line))
	if strings.Contains(got, "MARKER") {
		t.Errorf("not redacted: %s", got)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(got), &v); err != nil || v["kind"] != "log" {
		t.Errorf("redacted line is not the same JSON: %s (%v)", got, err)
	}
}

func TestAddRedactsTheSecretOnly(t *testing.T) {
	var s Set
	s.Add("c2VjcmV0LXNlY3JldA==", " pw ")
	got := s.String(`TSIG key switchyard-test. secret c2VjcmV0LXNlY3JldA== pw`)
	if got != "TSIG key switchyard-test. secret "+Mark+" pw" {
		t.Errorf("got %q", got)
	}
}

func TestJSONWithoutHTMLEscapes(t *testing.T) {
	var s Set
	s.Add(`MARKER<&>"quoted"`)
	for _, line := range []string{`{"msg":"a MARKER\u003c\u0026\u003e\"quoted\" b"}`, `{"msg":"a MARKER<&>\"quoted\" b"}`} {
		if got := string(s.JSON([]byte(line))); got != `{"msg":"a `+Mark+` b"}` {
			t.Errorf("%s -> %s", line, got)
		}
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	var s Set
	s.Add("MARKER-in-error")
	base := errors.New("base")
	err := s.Error(fmt.Errorf("tofu init: %w: saw MARKER-in-error", base))
	if strings.Contains(err.Error(), "MARKER") || !errors.Is(err, base) {
		t.Errorf("got %v (is base: %v)", err, errors.Is(err, base))
	}
	if s.Error(nil) != nil || s.Error(base) != base {
		t.Error("an error without fragments changed")
	}
}

func TestWriterLongLineCutsOutsideFragments(t *testing.T) {
	var s Set
	secret := "MARKER-long-line-secret"
	s.Add(secret)
	var out strings.Builder
	w := s.NewWriter(&out)
	// A line longer than maxHeld, the secret at every offset around the cut.
	var line strings.Builder
	for line.Len() < 3*maxHeld {
		line.WriteString("x " + secret + " ")
		line.WriteString(strings.Repeat("y", line.Len()%7))
	}
	for b := []byte(line.String()); len(b) > 0; {
		n := min(len(b), 1000)
		w.Write(b[:n])
		b = b[n:]
	}
	if out.Len() == 0 {
		t.Fatal("nothing written of an overlong line")
	}
	w.Flush()
	if strings.Contains(out.String(), "MARKER") || strings.Contains(out.String(), "line-secret") {
		t.Error("a fragment was split at a cut")
	}
	if want := strings.ReplaceAll(line.String(), secret, Mark); out.String() != want {
		t.Errorf("output differs from the redacted input (%d vs %d bytes)", out.Len(), len(want))
	}
}

func TestNilSet(t *testing.T) {
	var s *Set
	s.Add("MARKER-nil")
	s.AddContent([]byte("MARKER-nil"))
	if s.String("MARKER-nil") != "MARKER-nil" || string(s.JSON([]byte("x"))) != "x" {
		t.Error("a nil set redacted")
	}
}

func TestPEMLine(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 1},
		{"junk\n", 1},
		{"\n\njunk\n", 3},
		{"-----BEGIN X KEY-----\nAAAA\n-----END X KEY-----\n", 1},
		{"\n-----BEGIN X KEY-----\nAAAA\n-----END X KEY-----\n", 2},
		{"-----BEGIN X KEY-----\nnot base64!\n-----END X KEY-----\n", 1},
		{"\n\njunk\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 3},
		{"-----BEGIN A-----\nAAAA\n-----END A-----\n-----BEGIN B-----\n!!\n-----END B-----\n", 4},
		{"-----BEGIN A-----\nAAAA\n-----END A-----\n\ntrailing\n", 5},
	} {
		if got := PEMLine([]byte(c.in)); got != c.want {
			t.Errorf("PEMLine(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
