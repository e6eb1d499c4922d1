package data

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-nix/switchyard/plan/field"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want string
	}{
		{"sorted keys, no whitespace", map[string]any{"b": 1, "a": []any{true, nil, "x"}, "B": map[string]any{}}, `{"B":{},"a":[true,null,"x"],"b":1}`},
		{"no HTML escapes", "<a&b>", `"<a&b>"`},
		{"short escapes", "q\"b\\n\nr\rt\tb\bf\f", `"q\"b\\n\nr\rt\tb\bf\f"`},
		{"control characters", "\x00\x1f\x7f", `"\u0000\u001f` + "\x7f" + `"`},
		{"unicode kept", "é€😀\u2028", "\"é€😀\u2028\""},
		{"integer number", json.Number("-0"), `0`},
		{"large integer", json.Number("9223372036854775807"), `9223372036854775807`},
		{"float stays float", json.Number("2.0"), `2.0`},
		{"float exponent", json.Number("1E3"), `1000.0`},
		{"tiny float", json.Number("1e-7"), `1e-07`},
		{"float64", 0.5, `0.5`},
		{"repo path", RepoPath("apps/hello.nix"), `{"_repoPath":"apps/hello.nix"}`},
		{"string maps and lists", map[string]any{"m": map[string]string{"z": "1", "a": "2"}, "l": []string{"b", "a"}}, `{"l":["b","a"],"m":{"a":"2","z":"1"}}`},
		{"keys by code point", map[string]any{"é": 1, "z": 2, "Z": 3, "\U0001F600": 4, "\uFFFD": 5}, "{\"Z\":3,\"z\":2,\"é\":1,\"\uFFFD\":5,\"\U0001F600\":4}"},
	} {
		got, err := Canonical(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestCanonicalRefusesNonData(t *testing.T) {
	for name, v := range map[string]any{
		"function":      func() {},
		"struct":        struct{}{},
		"bad utf-8":     "\xff",
		"bad utf-8 key": map[string]any{"\xff": 1},
		"NaN":           math.NaN(),
		"Inf":           math.Inf(1),
		"huge integer":  json.Number("99999999999999999999"),
		"huge float":    json.Number("1e400"),
		"nested func":   map[string]any{"a": []any{func() {}}},
	} {
		if _, err := Canonical(v); err == nil {
			t.Errorf("%s: encoded, want a refusal", name)
		}
	}
}

// Canonical output is valid JSON that encoding/json reads back to the same value.
func TestCanonicalRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		v := randomValue(r, 0)
		b, err := Canonical(v)
		if err != nil {
			t.Fatalf("%#v: %v", v, err)
		}
		back, err := ParseData(b)
		if err != nil {
			t.Fatalf("%s does not parse: %v", b, err)
		}
		again, err := Canonical(back)
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(b) {
			t.Fatalf("not stable:\n%s\n%s", b, again)
		}
		var std any
		if err := json.Unmarshal(b, &std); err != nil {
			t.Fatalf("encoding/json refuses %s: %v", b, err)
		}
		if hasWhitespaceOutsideStrings(b) {
			t.Fatalf("whitespace in %s", b)
		}
	}
}

func hasWhitespaceOutsideStrings(b []byte) bool {
	in, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\n' || c == '\t' || c == '\r'):
			return true
		}
	}
	return false
}

// FuzzParseCanonical: whatever the bytes, Parse never panics, and what it accepts encodes
// canonically to bytes that parse back to the same encoding.
func FuzzParseCanonical(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true],"b":{}}`, `{"_repoPath":"a/b"}`, `"\u0000"`, `[{"a":1,"a":2}]`, `1e5`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseData(b)
		if err != nil {
			return
		}
		c, err := Canonical(v)
		if err != nil {
			t.Fatalf("parsed data does not encode: %v", err)
		}
		back, err := ParseData(c)
		if err != nil {
			t.Fatalf("canonical %s does not parse: %v", c, err)
		}
		c2, _ := Canonical(back)
		if string(c2) != string(c) {
			t.Fatalf("unstable: %s vs %s", c, c2)
		}
	})
}

func randomValue(r *rand.Rand, depth int) any {
	n := 9
	if depth > 3 {
		n = 6
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return randomString(r)
	case 3:
		return json.Number(string(rune('0' + r.IntN(10))))
	case 4:
		return json.Number("-12.5e3")
	case 5:
		return RepoPath("dir/" + "f.nix")
	case 6, 7:
		m := map[string]any{}
		for i := r.IntN(4); i > 0; i-- {
			m[randomString(r)] = randomValue(r, depth+1)
		}
		return m
	default:
		a := []any{}
		for i := r.IntN(4); i > 0; i-- {
			a = append(a, randomValue(r, depth+1))
		}
		return a
	}
}

func randomString(r *rand.Rand) string {
	alphabet := []rune("ab\"\\\n\x01é😀 <>&")
	var b strings.Builder
	for i := r.IntN(6); i > 0; i-- {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func TestParse(t *testing.T) {
	v, err := Parse([]byte(` {"a": [1, 2.5, "x", null, true], "b": {}} `))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": []any{json.Number("1"), json.Number("2.5"), "x", nil, true}, "b": map[string]any{}}
	if d := cmp.Diff(want, v); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestParseRefusals(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	for _, tc := range []struct {
		in, path, reason string
	}{
		{`{"a":1,"a":2}`, "a", "duplicate key"},
		{`{"a":{"b":[0,{"c":1,"c":1}]}}`, "a.b[1].c", "duplicate key"},
		{`{} {}`, "", "data after the value"},
		{`{"a":`, "a", "not JSON"},
		{"\"\xff\"", "", "not UTF-8"},
		{``, "", "not JSON"},
		{deep, "", "nested deeper"},
	} {
		_, err := Parse([]byte(tc.in))
		fe, ok := err.(*field.Error)
		if !ok {
			t.Errorf("%q: error %v, want a *field.Error", tc.in, err)
			continue
		}
		if !strings.HasPrefix(string(fe.Path), tc.path) || !strings.Contains(fe.Reason, tc.reason) {
			t.Errorf("%q: got %q at %q, want %q at %q", tc.in, fe.Reason, fe.Path, tc.reason, tc.path)
		}
	}
}

func TestLift(t *testing.T) {
	v, err := ParseData([]byte(`{"m":{"_repoPath":"./apps//hello.nix"},"l":[{"_repoPath":"x"}],"n":3}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"m": RepoPath("apps/hello.nix"), "l": []any{RepoPath("x")}, "n": json.Number("3")}
	if d := cmp.Diff(want, v); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	for in, wantPath := range map[string]string{
		`{"a":{"b":{"__switchyard_not_data":"a function"}}}`: "a.b",
		`{"a":[{"_repoPath":"../etc/passwd"}]}`:              "a[0]",
		`{"a":{"_repoPath":"/etc/passwd"}}`:                  "a",
		`{"a":{"_repoPath":"x","extra":1}}`:                  "a",
		`{"a":{"_repoPath":1}}`:                              "a",
		`{"a":{"_repoPath":"."}}`:                            "a",
		`{"a":1e999}`:                                        "a",
		`{"a":123456789012345678901234567890}`:               "a",
	} {
		_, err := ParseData([]byte(in))
		if p, ok := field.PathOf(err); !ok || string(p) != wantPath {
			t.Errorf("%s: error %v, want a refusal at %s", in, err, wantPath)
		}
	}
}

func TestCleanRepoPath(t *testing.T) {
	for in, want := range map[string]string{
		"apps/hello.nix":   "apps/hello.nix",
		"./apps/hello.nix": "apps/hello.nix",
		"a//b/":            "a/b",
		"a/./b":            "a/b",
	} {
		got, err := CleanRepoPath(in)
		if err != nil || string(got) != want {
			t.Errorf("%q: got %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "/etc/passwd", "..", "../x", "a/../b", "a/..", ".", "./", "~/x", "a\x00b"} {
		if got, err := CleanRepoPath(in); err == nil {
			t.Errorf("%q: accepted as %q", in, got)
		}
	}
}

func TestKindOf(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want Kind
	}{
		{nil, Null}, {true, Boolean}, {"s", String}, {json.Number("1"), Integer}, {json.Number("1.0"), Number},
		{json.Number("1e2"), Number}, {[]any{}, Array}, {map[string]any{}, Object}, {RepoPath("x"), Path}, {func() {}, ""},
	} {
		if got := KindOf(tc.v); got != tc.want {
			t.Errorf("KindOf(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
