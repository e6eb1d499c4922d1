package dnsupdate

import (
	"testing"

	"github.com/miekg/dns"
)

// The one update message Apply and Delete send for a have/want pair (issue 12
// item 3): removals by rdata, adds with want's TTL, never a whole-RRset removal
// in Apply, a header-only RRset removal in Delete, nothing when equal.
func TestUpdateMessage(t *testing.T) {
	const zone = "example.com."
	set := func(ttl uint32, recs ...string) RRset {
		return RRset{Name: "www.example.com.", Type: "A", TTL: ttl, Records: recs}
	}
	type rr struct {
		class uint16
		ttl   uint32
		data  string
	}
	cases := []struct {
		name string
		have *RRset
		want RRset
		msg  []rr // the update section; nil: no message
	}{
		{"create", nil, set(60, "192.0.2.2", "192.0.2.1"),
			[]rr{{dns.ClassINET, 60, "192.0.2.1"}, {dns.ClassINET, 60, "192.0.2.2"}}},
		{"equal", ptr(set(60, "192.0.2.1", "192.0.2.2")), set(60, "192.0.2.2", "192.0.2.1"), nil},
		{"both empty", ptr(set(60)), set(60), nil},
		{"replace one", ptr(set(60, "192.0.2.1", "192.0.2.2")), set(60, "192.0.2.1", "192.0.2.3"),
			[]rr{{dns.ClassNONE, 0, "192.0.2.2"}, {dns.ClassINET, 60, "192.0.2.1"}, {dns.ClassINET, 60, "192.0.2.3"}}},
		{"ttl in place", ptr(set(60, "192.0.2.1")), set(120, "192.0.2.1"),
			[]rr{{dns.ClassNONE, 0, "192.0.2.1"}, {dns.ClassINET, 120, "192.0.2.1"}}},
		{"empty want", ptr(set(60, "192.0.2.1")), set(60),
			[]rr{{dns.ClassNONE, 0, "192.0.2.1"}}},
	}
	for _, c := range cases {
		m, err := updateMsg(zone, c.have, c.want)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.msg == nil {
			if m != nil {
				t.Errorf("%s: a message %v, want none", c.name, m)
			}
			continue
		}
		if m == nil {
			t.Fatalf("%s: no message", c.name)
		}
		if m.Opcode != dns.OpcodeUpdate || len(m.Question) != 1 || m.Question[0].Name != zone || m.Question[0].Qtype != dns.TypeSOA {
			t.Errorf("%s: not an update of %s: %v", c.name, zone, m)
		}
		if len(m.Ns) != len(c.msg) {
			t.Fatalf("%s: update section %v, want %d RRs", c.name, m.Ns, len(c.msg))
		}
		for i, w := range c.msg {
			got := m.Ns[i]
			h := got.Header()
			if h.Class == dns.ClassANY {
				t.Errorf("%s: a whole-RRset removal %v", c.name, got)
			}
			a, ok := got.(*dns.A)
			if !ok || h.Class != w.class || h.Ttl != w.ttl || a.A.String() != w.data || h.Name != "www.example.com." {
				t.Errorf("%s: RR %d is %v, want class %d ttl %d %s", c.name, i, got, w.class, w.ttl, w.data)
			}
		}
	}
	if _, err := updateMsg(zone, nil, RRset{Name: "www.other.org.", Type: "A", Records: []string{"192.0.2.1"}}); err == nil {
		t.Error("a name outside the zone was accepted")
	}
	if _, err := updateMsg(zone, ptr(RRset{Name: "x.example.com.", Type: "A"}), set(60, "192.0.2.1")); err == nil {
		t.Error("have and want of different RRsets were accepted")
	}

	m, err := deleteMsg(zone, "WWW.example.com", "txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Ns) != 1 {
		t.Fatalf("delete: %v", m.Ns)
	}
	h := m.Ns[0].Header()
	if h.Name != "www.example.com." || h.Rrtype != dns.TypeTXT || h.Class != dns.ClassANY || h.Ttl != 0 {
		t.Errorf("delete: %v, want a header-only ANY-class TXT removal", m.Ns[0])
	}
	// It packs: a header-only record with no rdata.
	if _, err := m.Pack(); err != nil {
		t.Errorf("delete message does not pack: %v", err)
	}
}

func ptr(s RRset) *RRset { return &s }
