package effects

import (
	"reflect"
	"testing"
)

func TestParseLinkMatchMACs(t *testing.T) {
	got := parseLinkMatchMACs("# uplink\n[Match]\nPermanentMACAddress=02:5E:1F:de:ad:01 02:00:00:00:00:02\nOriginalName=eth*\n[Link]\nPermanentMACAddress=aa:aa:aa:aa:aa:aa\nName=uplink0\n")
	want := []string{"02:5e:1f:de:ad:01", "02:00:00:00:00:02"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if got := parseLinkMatchMACs("[Match]\nPermanentMACAddress=02:00:00:00:00:01\nPermanentMACAddress=\n"); got != nil {
		t.Fatalf("empty assignment must reset, got %v", got)
	}
}

// Recorded from a test-bed node (lo only) and a host with a bonded NIC.
const ipLinkRecorded = `1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00 promiscuity 0
2: eno1: <BROADCAST,MULTICAST,SLAVE,UP,LOWER_UP> mtu 1500 qdisc mq master bond0 state UP mode DEFAULT group default qlen 1000\    link/ether 3c:ec:ef:00:00:10 brd ff:ff:ff:ff:ff:ff permaddr 3c:ec:ef:00:00:11
3: eth1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc fq_codel state UP mode DEFAULT group default qlen 1000\    link/ether 52:54:00:AB:CD:EF brd ff:ff:ff:ff:ff:ff
`

func TestParsePermanentMACs(t *testing.T) {
	got := parsePermanentMACs(ipLinkRecorded)
	want := map[string]bool{"3c:ec:ef:00:00:11": true, "52:54:00:ab:cd:ef": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
}

func TestMACGate(t *testing.T) {
	node := map[string]bool{"52:54:00:ab:cd:ef": true}
	if r := macGate(nil, node); r != nil {
		t.Errorf("no .link files must not gate: %v", r)
	}
	if r := macGate(map[string][]string{"a.link": {"02:00:00:00:00:01"}, "b.link": {"52:54:00:ab:cd:ef"}}, node); r != nil {
		t.Errorf("one matching file passes: %v", r)
	}
	if r := macGate(map[string][]string{"b.link": {"02:00:00:00:00:01"}, "a.link": {"02:00:00:00:00:02"}}, node); !reflect.DeepEqual(r, []string{"a.link", "b.link"}) {
		t.Errorf("no match refuses naming the files: %v", r)
	}
}
