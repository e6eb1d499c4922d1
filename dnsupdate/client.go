package dnsupdate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// RRset is one RRset of a zone.
type RRset struct {
	Name    string   // lower-case FQDN with the trailing dot
	Type    string   // "A", "MX", ...
	TTL     uint32   // the RRset's TTL
	Records []string // canonical rdata (see Canonical), sorted
}

// Equal says whether two RRsets are the same: name, type, TTL and records.
func (s RRset) Equal(o RRset) bool {
	return CanonicalName(s.Name) == CanonicalName(o.Name) && strings.EqualFold(s.Type, o.Type) &&
		s.TTL == o.TTL && slices.Equal(sorted(s.Records), sorted(o.Records))
}

func sorted(r []string) []string {
	r = slices.Clone(r)
	slices.Sort(r)
	return slices.Compact(r)
}

// DefaultTimeout bounds one exchange with the server when Client.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// fudge is the TSIG time window, in seconds (RFC 8945's recommended value).
const fudge = 300

// Client talks to a zone's primary server: every message goes over TCP and is
// signed with Key.
type Client struct {
	Server  string        // host:port
	Key     Key           // the TSIG key every message is signed with
	Timeout time.Duration // per exchange; 0: DefaultTimeout
}

// ServerError is an answer of the server that refused or failed a request, or
// an answer whose TSIG signature did not verify.
type ServerError struct {
	Server    string // host:port
	Op        string // "update", "query", "SOA query"
	Rcode     int    // the answer's rcode
	TSIGError uint16 // the TSIG error of the answer's TSIG record (0: none)
	// Unverified is set when the client could not verify the answer's TSIG
	// signature (the answer is then not trusted, whatever its rcode).
	Unverified error
	// Detail says more about an answer that is NOERROR but unusable (not
	// authoritative).
	Detail string
}

func (e *ServerError) Error() string {
	prefix := "dns server " + e.Server + ": " + e.Op
	if e.Unverified != nil {
		return fmt.Sprintf("%s: the answer (%s) failed TSIG verification: %v", prefix, RcodeName(e.Rcode), e.Unverified)
	}
	s := prefix + " refused: " + RcodeName(e.Rcode)
	if e.TSIGError != 0 {
		s += " (TSIG " + RcodeName(int(e.TSIGError)) + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap gives the verification failure, if any.
func (e *ServerError) Unwrap() error { return e.Unverified }

// RcodeName names an rcode or TSIG error as DNS tools print it ("NOTAUTH",
// "BADSIG", ...).
func RcodeName(rc int) string {
	switch rc {
	case dns.RcodeBadSig:
		return "BADSIG" // 16 is also BADVERS; in a TSIG record it is BADSIG
	case dns.RcodeBadKey:
		return "BADKEY"
	case dns.RcodeBadTime:
		return "BADTIME"
	case dns.RcodeBadTrunc:
		return "BADTRUNC"
	}
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return fmt.Sprintf("RCODE%d", rc)
}

// exchange sends one signed message over TCP and returns the verified answer.
// Any rcode other than NOERROR (and NXDOMAIN when okNX) is a *ServerError.
func (c *Client) exchange(ctx context.Context, op string, m *dns.Msg, okNX bool) (*dns.Msg, error) {
	if !c.Key.Valid() {
		return nil, fmt.Errorf("dns server %s: %s: no TSIG key", c.Server, op)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m.SetTsig(c.Key.Name, c.Key.Algorithm, fudge, time.Now().Unix())
	cl := &dns.Client{Net: "tcp", TsigSecret: c.Key.secrets(), Timeout: timeout}
	r, _, err := cl.ExchangeContext(ctx, m, c.Server)
	if r == nil || (err != nil && !isTSIGError(err)) {
		if err == nil {
			err = errors.New("no answer")
		}
		return nil, fmt.Errorf("dns server %s: %s: %w", c.Server, op, err)
	}
	se := &ServerError{Server: c.Server, Op: op, Rcode: r.Rcode}
	if t := r.IsTsig(); t != nil {
		se.TSIGError = t.Error
	}
	if r.Rcode != dns.RcodeSuccess && !(okNX && r.Rcode == dns.RcodeNameError) {
		// A refusal is reported as the server gave it; its TSIG (if any) is
		// unsigned when the server could not verify ours.
		return nil, se
	}
	if err != nil {
		se.Unverified = err
		return nil, se
	}
	if r.IsTsig() == nil {
		// miekg only verifies a TSIG that is there: an unsigned answer to a
		// signed request proves nothing.
		se.Unverified = errors.New("the answer is not signed")
		return nil, se
	}
	if se.TSIGError != 0 {
		return nil, se
	}
	return r, nil
}

// isTSIGError says whether err is miekg's failure to verify an answer's TSIG.
func isTSIGError(err error) bool {
	return errors.Is(err, dns.ErrAuth) || errors.Is(err, dns.ErrSig) || errors.Is(err, dns.ErrTime) ||
		errors.Is(err, dns.ErrSecret) || errors.Is(err, dns.ErrKeyAlg) || errors.Is(err, dns.ErrNoSig)
}

// rrtype parses a record type name.
func rrtype(typ string) (uint16, error) {
	t, ok := dns.StringToType[strings.ToUpper(typ)]
	if !ok {
		return 0, fmt.Errorf("unknown record type %q", typ)
	}
	return t, nil
}

// inZone checks that name belongs to zone and returns both canonical.
func inZone(zone, name string) (string, string, error) {
	zone, name = CanonicalName(zone), CanonicalName(name)
	if _, ok := dns.IsDomainName(name); !ok {
		return "", "", fmt.Errorf("%q is not a domain name", name)
	}
	if !dns.IsSubDomain(zone, name) {
		return "", "", fmt.Errorf("%s is not in zone %s", name, zone)
	}
	return zone, name, nil
}

// Read queries the server for the RRset name/typ of zone. Not found (NXDOMAIN or
// no data) is false; a refused or non-authoritative answer is an error.
func (c *Client) Read(ctx context.Context, zone, name, typ string) (RRset, bool, error) {
	_, name, err := inZone(zone, name)
	if err != nil {
		return RRset{}, false, err
	}
	t, err := rrtype(typ)
	if err != nil {
		return RRset{}, false, err
	}
	typ = dns.TypeToString[t]
	m := new(dns.Msg)
	m.SetQuestion(name, t)
	m.RecursionDesired = false
	r, err := c.exchange(ctx, "query "+strings.TrimSuffix(name, ".")+" "+typ, m, true)
	if err != nil {
		return RRset{}, false, err
	}
	if !r.Authoritative {
		return RRset{}, false, &ServerError{Server: c.Server, Op: "query " + strings.TrimSuffix(name, ".") + " " + typ,
			Rcode: r.Rcode, Detail: "the answer is not authoritative (is it the zone's primary?)"}
	}
	set := RRset{Name: name, Type: typ}
	first := true
	for _, rr := range r.Answer {
		h := rr.Header()
		if h.Rrtype != t || CanonicalName(h.Name) != name {
			continue // e.g. the CNAME an A query was answered with
		}
		if first || h.Ttl < set.TTL {
			set.TTL = h.Ttl
		}
		first = false
		set.Records = append(set.Records, rdata(rr))
	}
	if len(set.Records) == 0 {
		return RRset{}, false, nil
	}
	set.Records = sorted(set.Records)
	return set, true, nil
}

// rrs builds the RRs of a set from its canonical records.
func (s RRset) rrs(ttl uint32) ([]dns.RR, error) {
	out := make([]dns.RR, 0, len(s.Records))
	for _, rec := range s.Records {
		if strings.ContainsAny(rec, "\n\r") {
			return nil, fmt.Errorf("%s record %q: not one line", s.Type, rec)
		}
		rr, err := dns.NewRR(fmt.Sprintf("%s %d IN %s %s", CanonicalName(s.Name), ttl, strings.ToUpper(s.Type), rec))
		if err != nil || rr == nil {
			return nil, fmt.Errorf("%s record %q: not canonical rdata", s.Type, rec)
		}
		out = append(out, rr)
	}
	return out, nil
}

// updateMsg builds the one update making the server's RRset want given what it
// has (nil: none), or nil when nothing is to change. It removes, by rdata, the
// records of have that want does not hold, and adds every record of want with
// want.TTL: re-adding a record that exists changes its TTL in place, so the
// RRset is never removed as a whole.
func updateMsg(zone string, have *RRset, want RRset) (*dns.Msg, error) {
	zone, name, err := inZone(zone, want.Name)
	if err != nil {
		return nil, err
	}
	t, err := rrtype(want.Type)
	if err != nil {
		return nil, err
	}
	want.Name, want.Type, want.Records = name, dns.TypeToString[t], sorted(want.Records)
	var cur RRset
	if have != nil {
		cur = *have
		cur.Name, cur.Type, cur.Records = name, want.Type, sorted(have.Records)
		if CanonicalName(have.Name) != name || !strings.EqualFold(have.Type, want.Type) {
			return nil, fmt.Errorf("have %s %s and want %s %s: not the same RRset", have.Name, have.Type, name, want.Type)
		}
	}
	if len(cur.Records) == 0 && len(want.Records) == 0 {
		return nil, nil
	}
	if cur.Equal(want) {
		return nil, nil
	}
	// A TTL change removes, by rdata, every record the server has and adds them
	// again: knot ignores the add of a record it holds, whatever its TTL. Both
	// servers apply one update message as one transaction, so a query sees the
	// RRset before or after, never without its records.
	ttlChange := len(cur.Records) > 0 && cur.TTL != want.TTL
	gone := RRset{Name: name, Type: want.Type}
	for _, r := range cur.Records {
		if ttlChange || !slices.Contains(want.Records, r) {
			gone.Records = append(gone.Records, r)
		}
	}
	remove, err := gone.rrs(0)
	if err != nil {
		return nil, err
	}
	add, err := want.rrs(want.TTL)
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetUpdate(zone)
	if len(remove) > 0 {
		m.Remove(remove)
	}
	if len(add) > 0 {
		m.Insert(add)
	}
	return m, nil
}

// Apply makes the server's RRset want, given what the server has (nil: none),
// in exactly one signed update; when have already equals want it sends nothing
// (sent is false).
func (c *Client) Apply(ctx context.Context, zone string, have *RRset, want RRset) (sent bool, err error) {
	m, err := updateMsg(zone, have, want)
	if err != nil {
		return false, err
	}
	if m == nil {
		return false, nil
	}
	if _, err := c.exchange(ctx, "update", m, false); err != nil {
		return true, err
	}
	// A NOERROR answer is not the server's word that it holds want: RFC 2136
	// (3.4.2.2) has it ignore, silently, a CNAME added at a name with other data
	// and other data added at a CNAME. So the RRset is read back.
	have2, found, err := c.Read(ctx, zone, want.Name, want.Type)
	if err != nil {
		return true, fmt.Errorf("reading %s %s back after the update: %w", want.Name, want.Type, err)
	}
	if found != (len(want.Records) > 0) || (found && !slices.Equal(sorted(have2.Records), sorted(want.Records))) {
		return true, &IgnoredError{Want: want, Have: have2, Found: found}
	}
	return true, nil
}

// IgnoredError is an update the server answered NOERROR but did not make: it holds
// Have (Found false: no such RRset) where Want was written.
type IgnoredError struct {
	Want, Have RRset
	Found      bool
}

func (e *IgnoredError) Error() string {
	holds := "no such RRset"
	if e.Found {
		holds = strings.Join(e.Have.Records, ", ")
	}
	return fmt.Sprintf("the server ignored the update of %s %s: it holds %s, not %s (RFC 2136 servers ignore a CNAME next to other records at a name, and other records next to a CNAME)",
		e.Want.Name, e.Want.Type, holds, strings.Join(e.Want.Records, ", "))
}

// deleteMsg builds the update removing the whole RRset name/typ.
func deleteMsg(zone, name, typ string) (*dns.Msg, error) {
	zone, name, err := inZone(zone, name)
	if err != nil {
		return nil, err
	}
	t, err := rrtype(typ)
	if err != nil {
		return nil, err
	}
	// A header-only RR: dns.NewRR("name 0 ANY A") returns nil, on which
	// RemoveRRset panics.
	hdr := &dns.ANY{Hdr: dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET}}
	m := new(dns.Msg)
	m.SetUpdate(zone)
	m.RemoveRRset([]dns.RR{hdr})
	return m, nil
}

// Delete removes the whole RRset name/typ in one signed update; an RRset
// already gone is fine.
func (c *Client) Delete(ctx context.Context, zone, name, typ string) error {
	m, err := deleteMsg(zone, name, typ)
	if err != nil {
		return err
	}
	_, err = c.exchange(ctx, "update", m, false)
	return err
}

// Check sends a TSIG-signed SOA query for zone: it proves the key and that the
// server is authoritative for the zone.
func (c *Client) Check(ctx context.Context, zone string) error {
	zone = CanonicalName(zone)
	m := new(dns.Msg)
	m.SetQuestion(zone, dns.TypeSOA)
	m.RecursionDesired = false
	op := "SOA query for " + zone
	r, err := c.exchange(ctx, op, m, false)
	if err != nil {
		return err
	}
	for _, rr := range r.Answer {
		if rr.Header().Rrtype == dns.TypeSOA && CanonicalName(rr.Header().Name) == zone {
			if !r.Authoritative {
				break
			}
			return nil
		}
	}
	return &ServerError{Server: c.Server, Op: op, Rcode: r.Rcode, Detail: "not authoritative for the zone"}
}
