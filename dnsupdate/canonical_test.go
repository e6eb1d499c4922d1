package dnsupdate

import (
	"strings"
	"testing"
)

// Canonical forms of the values the tree gives (issue 12 item 3).
func TestCanonical(t *testing.T) {
	long := strings.Repeat("x", 300)
	cases := []struct{ typ, value, want string }{
		{"A", "192.0.2.1", "192.0.2.1"},
		{"a", " 192.0.2.1 ", "192.0.2.1"},
		{"AAAA", "2001:DB8:0:0::1", "2001:db8::1"},
		{"CNAME", "Web", "web.example.com."},
		{"CNAME", "@", "example.com."},
		{"CNAME", "Target.Other.ORG.", "target.other.org."},
		{"MX", "10 mail", "10 mail.example.com."},
		{"MX", "20 MX.Other.org.", "20 mx.other.org."},
		{"TXT", "v=spf1 -all", `"v=spf1 -all"`},
		{"TXT", `say "hi"; ok`, `"say \"hi\"; ok"`},
		{"TXT", "", `""`},
		{"TXT", long, `"` + long[:255] + `" "` + long[255:] + `"`},
		{"NS", "ns1", "ns1.example.com."},
		{"SRV", "0 5 5060 SIP", "0 5 5060 sip.example.com."},
		{"CAA", `0 Issue "letsencrypt.org"`, `0 issue "letsencrypt.org"`},
	}
	for _, c := range cases {
		got, err := Canonical(c.typ, c.value, "Example.COM")
		if err != nil {
			t.Errorf("%s %q: %v", c.typ, c.value, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s %q: %q, want %q", c.typ, c.value, got, c.want)
		}
		// Canonical is a fixed point: the canonical form of a canonical value
		// (TXT aside: its input is one logical string, not presentation).
		if c.typ != "TXT" {
			if again, err := Canonical(c.typ, got, "example.com"); err != nil || again != got {
				t.Errorf("%s %q: not a fixed point: %q %v", c.typ, got, again, err)
			}
		}
	}
	bad := []struct{ typ, value string }{
		{"A", "192.0.2"}, {"A", "2001:db8::1"}, {"AAAA", "192.0.2.1"}, {"A", "192.0.2.1 192.0.2.2"},
		{"MX", "mail"}, {"A", "192.0.2.1\nevil 60 IN A 192.0.2.9"}, {"A", ""}, {"CNAME", "a..b"},
		{"HINFO", "x y"}, {"BOGUS", "x"},
	}
	for _, c := range bad {
		_, err := Canonical(c.typ, c.value, "example.com")
		if err == nil {
			t.Errorf("%s %q: accepted", c.typ, c.value)
			continue
		}
		if !strings.Contains(err.Error(), strings.ToUpper(c.typ)) && !strings.Contains(err.Error(), c.typ) {
			t.Errorf("%s %q: error %q does not name the type", c.typ, c.value, err)
		}
		if c.typ != "HINFO" && c.typ != "BOGUS" && !strings.Contains(err.Error(), strings.Split(c.value, "\n")[0]) {
			t.Errorf("%s %q: error %q does not name the value", c.typ, c.value, err)
		}
	}
}

// What Canonical returns is canonical; the raw values the tree gives are not.
func TestIsCanonical(t *testing.T) {
	for _, c := range []struct{ typ, value string }{{"A", "192.0.2.1"}, {"AAAA", "2001:db8::1"}, {"CNAME", "web"},
		{"MX", "10 mail"}, {"TXT", "hello world"}, {"TXT", strings.Repeat("y", 600)}, {"CAA", `0 Issue "x.org"`}} {
		got, err := Canonical(c.typ, c.value, "example.com.")
		if err != nil {
			t.Fatal(err)
		}
		if !IsCanonical(c.typ, got) {
			t.Errorf("%s %q: Canonical gave %q, which IsCanonical refuses", c.typ, c.value, got)
		}
	}
	for _, c := range []struct{ typ, value string }{{"AAAA", "2001:DB8::1"}, {"CNAME", "web"}, {"CNAME", "Web.example.com."},
		{"MX", "10 mail"}, {"TXT", "hello world"}, {"A", "192.0.2.1\n"}, {"BOGUS", "x"}} {
		if IsCanonical(c.typ, c.value) {
			t.Errorf("%s %q: called canonical", c.typ, c.value)
		}
	}
}
