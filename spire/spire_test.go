package spire_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/spire"
	"github.com/switchyard-nix/switchyard/testbed/spireserver"
)

// Issue 12 item 4: the IDs switchyard derives.
func TestIDs(t *testing.T) {
	if got := spire.AgentID("example.org", "shop", "web1"); got != "spiffe://example.org/switchyard/agent/shop/web1" {
		t.Errorf("AgentID %s", got)
	}
	if got := spire.WorkloadID("example.org", "shop", "web1", "cart"); got != "spiffe://example.org/shop/web1/cart" {
		t.Errorf("WorkloadID %s", got)
	}
	id := spire.EntryID("shop", "web1", "cart", "cart.service")
	if id != spire.EntryID("shop", "web1", "cart", "cart.service") {
		t.Error("EntryID not deterministic")
	}
	if !strings.HasPrefix(id, spire.EntryIDPrefix) || len(id) > 255 {
		t.Errorf("EntryID %q", id)
	}
	for _, r := range id {
		if r < 0x21 || r > 0x7e {
			t.Errorf("EntryID %q: %q not printable ASCII", id, r)
		}
	}
	seen := map[string]bool{id: true}
	for _, parts := range [][4]string{
		{"shop", "web1", "cart", "cart2.service"}, {"shop", "web2", "cart", "cart.service"},
		{"shopweb1", "", "cart", "cart.service"}, {"shop", "web1cart", "", "cart.service"},
	} {
		other := spire.EntryID(parts[0], parts[1], parts[2], parts[3])
		if seen[other] {
			t.Errorf("EntryID %v collides", parts)
		}
		seen[other] = true
	}
	if spire.SystemdSelector("a.service") != "systemd:id:a.service" {
		t.Error("SystemdSelector")
	}
}

func TestDialAddress(t *testing.T) {
	ctx := context.Background()
	_, err := spire.Dial(ctx, "127.0.0.1:8081")
	if err == nil || !strings.Contains(err.Error(), "not supported yet") || !strings.Contains(err.Error(), "unix:///") {
		t.Errorf("host:port: %v", err)
	}
	for _, bad := range []string{"", "unix://relative.sock", "tcp://127.0.0.1:1"} {
		if _, err := spire.Dial(ctx, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	c, err := spire.Dial(ctx, "unix:///nonexistent/api.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Healthy(ctx); err == nil || !strings.Contains(err.Error(), "unix:///nonexistent/api.sock") {
		t.Errorf("no server: %v, want an error naming the address", err)
	}
}

// Issue 12 item 4 against a real SPIRE server: a join token aliased to the
// node's agent ID, entries created under derived IDs, idempotent, updated on a
// change, read, deleted; DeleteAgent removes the alias.
func TestServer(t *testing.T) {
	const td = "switchyard.test"
	srv := spireserver.Start(t, td)
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Healthy(ctx); err != nil {
		t.Fatal(err)
	}

	agent := spire.AgentID(td, "shop", "web1")
	token, err := c.CreateJoinToken(ctx, agent, time.Hour)
	if err != nil {
		t.Fatalf("join token: %v", err)
	}
	if token == "" {
		t.Fatal("empty token")
	}
	aliases, err := c.AgentAliases(ctx, agent)
	if err != nil || len(aliases) != 1 {
		t.Fatalf("aliases of %s: %v %v, want one", agent, aliases, err)
	}
	// The alias entry: join_token/<token> -> agent, as the server lists it.
	byToken, err := c.List(ctx, "spiffe://"+td+"/spire/agent/join_token/"+token)
	if err != nil || len(byToken) != 1 || byToken[0].SpiffeID != agent || byToken[0].ID != aliases[0] {
		t.Fatalf("entries under the token's agent ID: %+v %v", byToken, err)
	}
	for _, e := range srv.Entries(t) {
		if strings.Contains(e.ParentID+e.SpiffeID+strings.Join(e.Selectors, " "), token) {
			t.Errorf("a listed entry shows the token: %+v", e)
		}
	}
	if _, err := c.CreateJoinToken(ctx, "spiffe://"+td+"/spire/agent/x", time.Hour); err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("reserved agent ID: %v, want refused", err)
	}

	e := spire.Entry{
		ID:        spire.EntryID("shop", "web1", "cart", "cart.service"),
		SpiffeID:  spire.WorkloadID(td, "shop", "web1", "cart"),
		ParentID:  agent,
		Selectors: []string{spire.SystemdSelector("cart.service")},
	}
	if _, ok, err := c.Get(ctx, e.ID); err != nil || ok {
		t.Fatalf("Get before Ensure: %v %v", ok, err)
	}
	created, err := c.Ensure(ctx, e)
	if err != nil || !created {
		t.Fatalf("Ensure: %v %v, want created", created, err)
	}
	got, ok, err := c.Get(ctx, e.ID)
	if err != nil || !ok || !got.Equal(e) {
		t.Fatalf("Get: %+v %v %v, want %+v", got, ok, err, e)
	}
	n := len(srv.Entries(t))
	if created, err = c.Ensure(ctx, e); err != nil || created {
		t.Errorf("second Ensure: %v %v, want nothing created", created, err)
	}
	if m := len(srv.Entries(t)); m != n {
		t.Errorf("second Ensure: %d entries, want %d", m, n)
	}

	// A changed selector updates the entry in place.
	e.Selectors = []string{spire.SystemdSelector("cart2.service")}
	if created, err = c.Ensure(ctx, e); err != nil || created {
		t.Fatalf("Ensure of a change: %v %v", created, err)
	}
	if got, ok, err = c.Get(ctx, e.ID); err != nil || !ok || !got.Equal(e) {
		t.Errorf("after the change: %+v %v %v", got, ok, err)
	}
	if m := len(srv.Entries(t)); m != n {
		t.Errorf("after the change: %d entries, want %d", m, n)
	}

	// The same entry under another ID is refused, naming the other ID.
	dup := e
	dup.ID = spire.EntryID("shop", "web1", "cart", "other")
	if _, err := c.Ensure(ctx, dup); err == nil || !strings.Contains(err.Error(), e.ID) {
		t.Errorf("a duplicate under another ID: %v", err)
	}

	if err := c.Delete(ctx, e.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, ok, err := c.Get(ctx, e.ID); err != nil || ok {
		t.Errorf("Get after Delete: %v %v", ok, err)
	}
	if err := c.Delete(ctx, e.ID); err != nil {
		t.Errorf("second Delete: %v", err)
	}

	if err := c.DeleteAgent(ctx, agent); err != nil {
		t.Fatalf("DeleteAgent: %v", err)
	}
	if aliases, err := c.AgentAliases(ctx, agent); err != nil || len(aliases) != 0 {
		t.Errorf("aliases after DeleteAgent: %v %v", aliases, err)
	}
	if err := c.DeleteAgent(ctx, agent); err != nil {
		t.Errorf("second DeleteAgent: %v", err)
	}
	if es := srv.Entries(t); len(es) != 0 {
		t.Errorf("entries left: %+v", es)
	}
}
