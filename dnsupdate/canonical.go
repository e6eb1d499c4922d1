package dnsupdate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/miekg/dns"
)

// maxCharString is the longest character-string a TXT record holds (RFC 1035).
const maxCharString = 255

// Canonical turns one rdata value as the tree gives it into the presentation
// form used everywhere (state, comparison, updates): A and AAAA normalised; the
// names of CNAME, MX, NS, SRV (and PTR) relative to origin unless they end in
// ".", lower case, fully qualified; TXT takes the value as one logical string,
// split into character-strings of at most 255 bytes and quoted as miekg prints
// them. A bad value is an error naming the type and the value.
func Canonical(typ, value, origin string) (string, error) {
	t := strings.ToUpper(strings.TrimSpace(typ))
	rrtype, ok := dns.StringToType[t]
	if !ok || !supported[rrtype] {
		return "", fmt.Errorf("record type %q not supported (only %s)", typ, supportedNames())
	}
	if origin == "" {
		origin = "."
	}
	origin = dns.Fqdn(strings.ToLower(origin))
	if rrtype == dns.TypeTXT {
		rr := &dns.TXT{Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: splitTXT(value)}
		return rdata(rr), nil
	}
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("%s record %q: %s", t, value, why)
	}
	if strings.TrimSpace(value) == "" {
		return bad("empty")
	}
	// One line of zone file text: a newline could smuggle in another record,
	// a "(" continue onto it.
	if strings.ContainsAny(value, "\n\r()") {
		return bad("not one line")
	}
	zp := dns.NewZoneParser(strings.NewReader("@ 0 IN "+t+" "+value+"\n"), origin, "")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return bad(parseError(err))
	}
	if len(rrs) != 1 || rrs[0].Header().Rrtype != rrtype {
		return bad("not one record")
	}
	return rdata(rrs[0]), nil
}

// supported are the record types Canonical accepts.
var supported = map[uint16]bool{
	dns.TypeA: true, dns.TypeAAAA: true, dns.TypeCNAME: true, dns.TypeTXT: true, dns.TypeMX: true,
	dns.TypeNS: true, dns.TypeSRV: true, dns.TypeCAA: true, dns.TypePTR: true,
}

func supportedNames() string {
	var names []string
	for t := range supported {
		names = append(names, dns.TypeToString[t])
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// parseError is the parser's complaint without its echo of the input line.
func parseError(err error) string {
	if pe, ok := err.(*dns.ParseError); ok {
		s := pe.Error()
		if i := strings.Index(s, " at line:"); i > 0 {
			s = s[:i]
		}
		return strings.TrimPrefix(s, "dns: ")
	}
	return err.Error()
}

// splitTXT splits one logical string into character-strings of at most 255
// bytes. The empty string is one empty character-string.
func splitTXT(s string) []string {
	if len(s) <= maxCharString {
		return []string{s}
	}
	var out []string
	for len(s) > maxCharString {
		out = append(out, s[:maxCharString])
		s = s[maxCharString:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

// rdata is the canonical presentation of an RR's data: domain names in it lower
// case, printed as miekg prints it, without the header.
func rdata(rr dns.RR) string {
	rr = dns.Copy(rr)
	switch r := rr.(type) {
	case *dns.CNAME:
		r.Target = strings.ToLower(r.Target)
	case *dns.MX:
		r.Mx = strings.ToLower(r.Mx)
	case *dns.NS:
		r.Ns = strings.ToLower(r.Ns)
	case *dns.SRV:
		r.Target = strings.ToLower(r.Target)
	case *dns.PTR:
		r.Ptr = strings.ToLower(r.Ptr)
	case *dns.CAA:
		r.Tag = strings.ToLower(r.Tag)
	}
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

// CanonicalName is a name as RRsets carry it: lower case, fully qualified.
func CanonicalName(name string) string { return dns.Fqdn(strings.ToLower(strings.TrimSpace(name))) }

// IsCanonical says whether record is already in the canonical presentation form
// of typ (what Canonical returns and Read gives), so that state and
// configuration compare equal.
func IsCanonical(typ, record string) bool {
	t, ok := dns.StringToType[strings.ToUpper(typ)]
	if !ok || !supported[t] || strings.ContainsAny(record, "\n\r") {
		return false
	}
	rr, err := dns.NewRR(". 0 IN " + dns.TypeToString[t] + " " + record)
	if err != nil || rr == nil || rr.Header().Rrtype != t {
		return false
	}
	return rdata(rr) == record
}

// Supported says whether Canonical, Apply and Read handle record type typ.
func Supported(typ string) bool {
	t, ok := dns.StringToType[strings.ToUpper(typ)]
	return ok && supported[t]
}
