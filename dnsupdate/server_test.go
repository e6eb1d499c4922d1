package dnsupdate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/dnsupdate"
	"github.com/switchyard-nix/switchyard/testbed/dnsserver"
)

func canon(t *testing.T, typ, origin string, values ...string) []string {
	t.Helper()
	var out []string
	for _, v := range values {
		c, err := dnsupdate.Canonical(typ, v, origin)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Against real bind9 and knot (issue 12 item 3): Apply creates every supported
// type and Read gives it back; a second Apply sends nothing; a TTL change is
// made in place (a poller never sees the RRset missing); a hand edit is seen by
// Read; Delete removes the RRset, and deleting it again is fine.
func TestServerRRsets(t *testing.T) {
	for _, kind := range dnsserver.Kinds() {
		t.Run(kind, func(t *testing.T) {
			s := dnsserver.Start(t, kind, "tenant.test", "hmac-sha256")
			c := &dnsupdate.Client{Server: s.Addr, Key: s.Key}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.Check(ctx, s.Zone); err != nil {
				t.Fatal(err)
			}
			long := strings.Repeat("0123456789", 40) // 400 bytes: two character-strings
			sets := []dnsupdate.RRset{
				{Name: "www.tenant.test.", Type: "A", TTL: 300, Records: canon(t, "A", s.Zone, "192.0.2.1", "192.0.2.2")},
				{Name: "www.tenant.test.", Type: "AAAA", TTL: 300, Records: canon(t, "AAAA", s.Zone, "2001:DB8::1")},
				{Name: "alias.tenant.test.", Type: "CNAME", TTL: 60, Records: canon(t, "CNAME", s.Zone, "www")},
				{Name: "tenant.test.", Type: "TXT", TTL: 120, Records: canon(t, "TXT", s.Zone, "v=spf1 -all", `say "hi"; ok`, long)},
				// named refuses an MX naming an in-zone host without an address.
				{Name: "mail.tenant.test.", Type: "A", TTL: 300, Records: canon(t, "A", s.Zone, "192.0.2.25")},
				{Name: "tenant.test.", Type: "MX", TTL: 3600, Records: canon(t, "MX", s.Zone, "10 mail", "20 mx.other.example.")},
			}
			for _, want := range sets {
				_, ok, err := c.Read(ctx, s.Zone, want.Name, want.Type)
				if err != nil || ok {
					t.Fatalf("%s %s before: found %v, %v", want.Name, want.Type, ok, err)
				}
				n := s.Updates(t)
				sent, err := c.Apply(ctx, s.Zone, nil, want)
				if err != nil || !sent {
					t.Fatalf("apply %s %s: sent %v, %v", want.Name, want.Type, sent, err)
				}
				if got := s.Updates(t) - n; got != 1 {
					t.Errorf("apply %s %s: %d update messages, want exactly one", want.Name, want.Type, got)
				}
				got, ok, err := c.Read(ctx, s.Zone, want.Name, want.Type)
				if err != nil || !ok || !got.Equal(want) {
					t.Fatalf("read %s %s: %v %v %v, want %v", want.Name, want.Type, got, ok, err, want)
				}
				if ttl, recs := s.Query(t, want.Name, want.Type); ttl != want.TTL || !slices.Equal(recs, want.Records) {
					t.Errorf("plain query %s %s: %d %q, want %d %q", want.Name, want.Type, ttl, recs, want.TTL, want.Records)
				}
			}

			// Nothing changed: no update at all.
			before := s.Updates(t)
			if before < len(sets) {
				t.Fatalf("the server counted %d updates after %d applies", before, len(sets))
			}
			for _, want := range sets {
				have, _, err := c.Read(ctx, s.Zone, want.Name, want.Type)
				if err != nil {
					t.Fatal(err)
				}
				if sent, err := c.Apply(ctx, s.Zone, &have, want); err != nil || sent {
					t.Fatalf("second apply %s %s: sent %v, %v", want.Name, want.Type, sent, err)
				}
			}
			if n := s.Updates(t); n != before {
				t.Errorf("a second apply with nothing changed: %d updates, want %d", n, before)
			}

			// A TTL change in place, while a poller reads the RRset over TCP.
			a := sets[0]
			var stop atomic.Bool
			var wg sync.WaitGroup
			var polls, missing atomic.Int64
			var pollErr atomic.Value
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					_, recs, err := s.QueryErr(a.Name, a.Type)
					if err != nil {
						pollErr.Store(err)
						return
					}
					polls.Add(1)
					if !slices.Equal(recs, a.Records) {
						missing.Add(1)
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
			time.Sleep(50 * time.Millisecond)
			for _, ttl := range []uint32{30, 600, 45, 300} {
				have, _, err := c.Read(ctx, s.Zone, a.Name, a.Type)
				if err != nil {
					t.Fatal(err)
				}
				want := a
				want.TTL = ttl
				n := s.Updates(t)
				if sent, err := c.Apply(ctx, s.Zone, &have, want); err != nil || !sent {
					t.Fatalf("ttl %d: sent %v, %v", ttl, sent, err)
				}
				if got := s.Updates(t) - n; got != 1 {
					t.Errorf("ttl %d: %d update messages, want exactly one", ttl, got)
				}
				got, _, err := c.Read(ctx, s.Zone, a.Name, a.Type)
				if err != nil || got.TTL != ttl || !slices.Equal(got.Records, a.Records) {
					t.Fatalf("after the ttl change to %d: %v %v", ttl, got, err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			stop.Store(true)
			wg.Wait()
			if err, _ := pollErr.Load().(error); err != nil {
				t.Fatal(err)
			}
			if missing.Load() != 0 || polls.Load() < 10 {
				t.Errorf("TTL changes: %d of %d polls saw other records than %v", missing.Load(), polls.Load(), a.Records)
			}

			// A hand edit is what Read reports; Apply puts the RRset back.
			s.NSUpdate(t, "update add www.tenant.test. 300 A 192.0.2.99\nupdate delete www.tenant.test. A 192.0.2.1\n")
			have, ok, err := c.Read(ctx, s.Zone, a.Name, a.Type)
			if err != nil || !ok || !slices.Equal(have.Records, []string{"192.0.2.2", "192.0.2.99"}) {
				t.Fatalf("after the hand edit: %v %v %v", have, ok, err)
			}
			if sent, err := c.Apply(ctx, s.Zone, &have, a); err != nil || !sent {
				t.Fatalf("restore: %v %v", sent, err)
			}
			if got, _, err := c.Read(ctx, s.Zone, a.Name, a.Type); err != nil || !got.Equal(a) {
				t.Fatalf("after the restore: %v %v", got, err)
			}

			// Delete removes exactly that RRset.
			if err := c.Delete(ctx, s.Zone, a.Name, a.Type); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := c.Read(ctx, s.Zone, a.Name, a.Type); err != nil || ok {
				t.Fatalf("after delete: found %v, %v", ok, err)
			}
			if got, ok, err := c.Read(ctx, s.Zone, "www.tenant.test.", "AAAA"); err != nil || !ok || !got.Equal(sets[1]) {
				t.Fatalf("delete of A took the AAAA too: %v %v %v", got, ok, err)
			}
			if err := c.Delete(ctx, s.Zone, a.Name, a.Type); err != nil {
				t.Fatalf("delete of a deleted RRset: %v", err)
			}
			if _, _, err := c.Read(ctx, "tenant.test.", "www.other.test.", "A"); err == nil {
				t.Error("read outside the zone accepted")
			}
		})
	}
}

// A wrong key (issue 12 item 3): the update is refused with the server's answer
// named, nothing changes on the server, and Check fails; with the right key
// Check passes. Every HMAC-SHA algorithm is accepted by both servers.
func TestServerWrongKey(t *testing.T) {
	for _, kind := range dnsserver.Kinds() {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, alg := range dnsupdate.Algorithms() {
				s := dnsserver.Start(t, kind, "keys.test", alg)
				c := &dnsupdate.Client{Server: s.Addr, Key: s.Key}
				if err := c.Check(ctx, s.Zone); err != nil {
					t.Fatalf("%s: check with the right key: %v", alg, err)
				}
				want := dnsupdate.RRset{Name: "x.keys.test.", Type: "A", TTL: 60, Records: []string{"192.0.2.7"}}
				if sent, err := c.Apply(ctx, s.Zone, nil, want); err != nil || !sent {
					t.Fatalf("%s: apply: %v", alg, err)
				}
			}
			s := dnsserver.Start(t, kind, "keys.test", "hmac-sha256")
			dir := t.TempDir()
			keys := map[string]string{
				// the server's key name with another secret: BADSIG
				"BADSIG": fmt.Sprintf("key %q { algorithm hmac-sha256; secret \"d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZyE=\"; };", strings.TrimSuffix(s.Key.Name, ".")),
				// a key the server does not know: BADKEY
				"BADKEY": `key "stranger" { algorithm hmac-sha256; secret "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZyE="; };`,
			}
			for tsigErr, text := range keys {
				p := filepath.Join(dir, tsigErr)
				if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
				k, err := dnsupdate.ReadKeyFile(p)
				if err != nil {
					t.Fatal(err)
				}
				c := &dnsupdate.Client{Server: s.Addr, Key: k}
				sent, err := c.Apply(ctx, s.Zone, nil, dnsupdate.RRset{Name: "evil.keys.test.", Type: "A", TTL: 60, Records: []string{"192.0.2.66"}})
				var se *dnsupdate.ServerError
				if !sent || !errors.As(err, &se) {
					t.Fatalf("%s: apply: sent %v, %v (want a ServerError)", tsigErr, sent, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, s.Addr) || !strings.Contains(msg, "NOTAUTH") || !strings.Contains(msg, "TSIG "+tsigErr) {
					t.Errorf("%s: error %q does not name the server and its answer", tsigErr, msg)
				}
				if strings.Contains(msg, "d3Jvbmc") {
					t.Errorf("%s: error shows the secret: %q", tsigErr, msg)
				}
				t.Logf("%s: %v", kind, err)
				if _, recs := s.Query(t, "evil.keys.test.", "A"); len(recs) != 0 {
					t.Errorf("%s: the refused update changed the server: %v", tsigErr, recs)
				}
				if err := c.Check(ctx, s.Zone); err == nil || !errors.As(err, &se) {
					t.Errorf("%s: check with a wrong key: %v", tsigErr, err)
				}
				if _, _, err := c.Read(ctx, s.Zone, "ns1.keys.test.", "A"); err == nil {
					t.Errorf("%s: read with a wrong key passed", tsigErr)
				}
				if err := c.Delete(ctx, s.Zone, "ns1.keys.test.", "A"); err == nil {
					t.Errorf("%s: delete with a wrong key passed", tsigErr)
				}
				if _, recs := s.Query(t, "ns1.keys.test.", "A"); len(recs) != 1 {
					t.Errorf("%s: the refused delete changed the server: %v", tsigErr, recs)
				}
			}
			// Check of a zone the server does not serve fails.
			c := &dnsupdate.Client{Server: s.Addr, Key: s.Key}
			if err := c.Check(ctx, "other.test."); err == nil {
				t.Error("check of a zone the server does not serve passed")
			} else {
				t.Logf("%s: other zone: %v", kind, err)
			}
		})
	}
}

// Issue 31 item 5, against real bind9 and knot: an update the server answers
// NOERROR but ignores (RFC 2136 3.4.2.2: other data next to a CNAME, a CNAME next
// to other data) is an error naming the RRset and what the server holds.
func TestServerIgnoredUpdate(t *testing.T) {
	for _, kind := range dnsserver.Kinds() {
		t.Run(kind, func(t *testing.T) {
			s := dnsserver.Start(t, kind, "tenant.test", "hmac-sha256")
			c := &dnsupdate.Client{Server: s.Addr, Key: s.Key}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cname := dnsupdate.RRset{Name: "alias.tenant.test.", Type: "CNAME", TTL: 60, Records: canon(t, "CNAME", s.Zone, "www")}
			if _, err := c.Apply(ctx, s.Zone, nil, cname); err != nil {
				t.Fatal(err)
			}
			a := dnsupdate.RRset{Name: "alias.tenant.test.", Type: "A", TTL: 60, Records: canon(t, "A", s.Zone, "192.0.2.7")}
			_, err := c.Apply(ctx, s.Zone, nil, a)
			var ignored *dnsupdate.IgnoredError
			if err == nil {
				_, recs := s.Query(t, a.Name, "A")
				t.Fatalf("an A next to a CNAME: no error; the server holds A %v", recs)
			}
			t.Logf("an A next to a CNAME: %v", err)
			if errors.As(err, &ignored) && (ignored.Found || !strings.Contains(err.Error(), "alias.tenant.test. A: it holds no such RRset, not 192.0.2.7")) {
				t.Errorf("the error does not say what the server holds: %v", err)
			}

			host := dnsupdate.RRset{Name: "host.tenant.test.", Type: "A", TTL: 60, Records: canon(t, "A", s.Zone, "192.0.2.8")}
			if _, err := c.Apply(ctx, s.Zone, nil, host); err != nil {
				t.Fatal(err)
			}
			over := dnsupdate.RRset{Name: "host.tenant.test.", Type: "CNAME", TTL: 60, Records: canon(t, "CNAME", s.Zone, "www")}
			if _, err := c.Apply(ctx, s.Zone, nil, over); err == nil {
				t.Errorf("a CNAME next to an A: no error")
			} else {
				t.Logf("a CNAME next to an A: %v", err)
			}
		})
	}
}
