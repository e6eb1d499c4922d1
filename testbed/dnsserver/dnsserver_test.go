package dnsserver

import (
	"slices"
	"testing"
)

// Each kind starts, answers, takes a hand edit through nsupdate with its key
// file, and counts it as one update (issue 12 item 3).
func TestStart(t *testing.T) {
	for _, kind := range Kinds() {
		t.Run(kind, func(t *testing.T) {
			s := Start(t, kind, "bed.test", "hmac-sha224")
			if s.Key.Name == "" || s.Zone != "bed.test." {
				t.Fatalf("server %+v", s)
			}
			if n := s.Updates(t); n != 0 {
				t.Errorf("%d updates before any", n)
			}
			s.NSUpdate(t, "update add h.bed.test. 60 A 192.0.2.5\n")
			if ttl, recs := s.Query(t, "h.bed.test.", "A"); ttl != 60 || !slices.Equal(recs, []string{"192.0.2.5"}) {
				t.Errorf("after nsupdate: %d %v", ttl, recs)
			}
			if n := s.Updates(t); n != 1 {
				t.Errorf("%d updates after one nsupdate", n)
			}
		})
	}
}
