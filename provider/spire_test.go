package provider

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/switchyard-nix/switchyard/spire"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/testbed/spireserver"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// Issue 12 item 4: the SPIRE resources as OpenTofu gets them; no attribute
// holds the join token.
func TestSpireSchema(t *testing.T) {
	_, schemas := providerSchemas(t)
	str, num := tftypes.String, tftypes.Number
	checkAttrs(t, "switchyard_spire_agent", schemas["switchyard_spire_agent"], map[string]wantAttr{
		"server":         {"required", str},
		"trust_domain":   {"required", str},
		"group":          {"required", str},
		"node":           {"required", str},
		"incus_instance": {"required", str},
		"incus_project":  {"required", str},
		"token_ttl":      {"optional+computed", num},
		"id":             {"computed", str},
		"agent_id":       {"computed", str},
	})
	checkAttrs(t, "switchyard_spire_entry", schemas["switchyard_spire_entry"], map[string]wantAttr{
		"server":    {"required", str},
		"entry_id":  {"required", str},
		"spiffe_id": {"required", str},
		"parent_id": {"required", str},
		"selectors": {"required", tftypes.List{ElementType: str}},
		"id":        {"computed", str},
	})
}

// tfResource drives one resource type through the plugin protocol, as
// OpenTofu does: plan, apply, read. Every answer's raw bytes and diagnostics
// are kept in seen, so that a test can tell a secret never left the provider.
type tfResource struct {
	t    *testing.T
	srv  tfprotov6.ProviderServer
	name string
	typ  tftypes.Object
	seen bytes.Buffer
}

func newTFResource(t *testing.T, name string) *tfResource {
	srv, schemas := providerSchemas(t)
	attrs := schemas[name]
	if attrs == nil {
		t.Fatalf("no resource %s", name)
	}
	typ := tftypes.Object{AttributeTypes: map[string]tftypes.Type{}}
	for n, a := range attrs {
		typ.AttributeTypes[n] = a.Type
	}
	// OpenTofu configures the provider before it plans or applies a resource.
	empty := tftypes.Object{AttributeTypes: map[string]tftypes.Type{}}
	cfg, _ := tfprotov6.NewDynamicValue(empty, tftypes.NewValue(empty, map[string]tftypes.Value{}))
	resp, err := srv.ConfigureProvider(context.Background(), &tfprotov6.ConfigureProviderRequest{Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Fatalf("configure: %s: %s", d.Summary, d.Detail)
	}
	return &tfResource{t: t, srv: srv, name: name, typ: typ}
}

// config is a configuration of the resource: the given attributes, the others null.
func (r *tfResource) config(set map[string]tftypes.Value) *tfprotov6.DynamicValue {
	vals := map[string]tftypes.Value{}
	for n, typ := range r.typ.AttributeTypes {
		vals[n] = tftypes.NewValue(typ, nil)
		if v, ok := set[n]; ok {
			vals[n] = v
		}
	}
	return r.dv(tftypes.NewValue(r.typ, vals))
}

func (r *tfResource) dv(v tftypes.Value) *tfprotov6.DynamicValue {
	dv, err := tfprotov6.NewDynamicValue(r.typ, v)
	if err != nil {
		r.t.Fatal(err)
	}
	return &dv
}

func (r *tfResource) null() *tfprotov6.DynamicValue { return r.dv(tftypes.NewValue(r.typ, nil)) }

// check records an answer and fails the test on an error diagnostic.
func (r *tfResource) check(what string, diags []*tfprotov6.Diagnostic, states ...*tfprotov6.DynamicValue) {
	r.t.Helper()
	for _, s := range states {
		if s != nil {
			r.seen.Write(s.MsgPack)
			r.seen.Write(s.JSON)
		}
	}
	failed := false
	for _, d := range diags {
		r.seen.WriteString(d.Summary + "\n" + d.Detail + "\n")
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			failed = true
			r.t.Errorf("%s %s: %s: %s", what, r.name, d.Summary, d.Detail)
		}
	}
	if failed {
		r.t.FailNow()
	}
}

// apply plans the change from prior to config and applies it (config nil: a
// delete); it returns the new state.
func (r *tfResource) apply(ctx context.Context, prior, config *tfprotov6.DynamicValue) *tfprotov6.DynamicValue {
	r.t.Helper()
	planned := r.null()
	if config != nil {
		presp, err := r.srv.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
			TypeName: r.name, PriorState: prior, ProposedNewState: config, Config: config})
		if err != nil {
			r.t.Fatal(err)
		}
		r.check("plan", presp.Diagnostics, presp.PlannedState)
		planned = presp.PlannedState
	} else {
		config = r.null()
	}
	aresp, err := r.srv.ApplyResourceChange(ctx, &tfprotov6.ApplyResourceChangeRequest{
		TypeName: r.name, PriorState: prior, PlannedState: planned, Config: config})
	if err != nil {
		r.t.Fatal(err)
	}
	r.check("apply", aresp.Diagnostics, aresp.NewState)
	return aresp.NewState
}

// read refreshes state; nil when the resource is gone.
func (r *tfResource) read(ctx context.Context, state *tfprotov6.DynamicValue) *tfprotov6.DynamicValue {
	r.t.Helper()
	resp, err := r.srv.ReadResource(ctx, &tfprotov6.ReadResourceRequest{TypeName: r.name, CurrentState: state})
	if err != nil {
		r.t.Fatal(err)
	}
	r.check("read", resp.Diagnostics, resp.NewState)
	if v := r.values(resp.NewState); v == nil {
		return nil
	}
	return resp.NewState
}

// values are the attributes of a state; nil for a null one.
func (r *tfResource) values(s *tfprotov6.DynamicValue) map[string]tftypes.Value {
	r.t.Helper()
	v, err := s.Unmarshal(r.typ)
	if err != nil {
		r.t.Fatal(err)
	}
	if v.IsNull() {
		return nil
	}
	var m map[string]tftypes.Value
	if err := v.As(&m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

func (r *tfResource) str(s *tfprotov6.DynamicValue, attr string) string {
	r.t.Helper()
	var out string
	if err := r.values(s)[attr].As(&out); err != nil {
		r.t.Fatalf("%s.%s: %v", r.name, attr, err)
	}
	return out
}

func (r *tfResource) list(s *tfprotov6.DynamicValue, attr string) []string {
	r.t.Helper()
	var vs []tftypes.Value
	if err := r.values(s)[attr].As(&vs); err != nil {
		r.t.Fatalf("%s.%s: %v", r.name, attr, err)
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		if err := v.As(&out[i]); err != nil {
			r.t.Fatal(err)
		}
	}
	return out
}

func tfStr(s string) tftypes.Value { return tftypes.NewValue(tftypes.String, s) }

func tfStrList(ss ...string) tftypes.Value {
	vs := make([]tftypes.Value, len(ss))
	for i, s := range ss {
		vs[i] = tfStr(s)
	}
	return tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, vs)
}

// Issue 12 item 4 through the plugin protocol against a real SPIRE server and a
// real instance: the agent's join token lands in the instance (0600 root, in a
// 0700 directory) and nowhere in state, plan or diagnostics; the entry is
// created under its derived ID, read back, shows a change made on the server
// as drift, is put back by an apply, and is deleted; a missing token file
// removes the agent from state, and the next create replaces the old token's
// alias; the agent's delete removes the alias and the file.
func TestSpireResources(t *testing.T) {
	bed := testbed.Require(t)
	const td = "switchyard.test"
	srv := spireserver.Start(t, td)
	sc := srv.Client(t)
	c := api.New("")
	t.Cleanup(c.Close)
	project := testProject(t, c)
	name := randomName("sy-spire-")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.SetState(ctx, project, name, "stop", true)
		_ = c.DeleteInstance(ctx, project, name)
	})
	if err := c.CreateInstance(ctx, project, api.InstancesPost{Name: name, Start: true,
		Source: api.InstanceSource{Type: "image", Alias: bed.Image}, InstancePut: api.InstancePut{Profiles: []string{"default"}}}); err != nil {
		t.Fatalf("create instance: %v", err)
	}

	agent := newTFResource(t, "switchyard_spire_agent")
	agentConf := agent.config(map[string]tftypes.Value{
		"server": tfStr(srv.Addr), "trust_domain": tfStr(td), "group": tfStr("shop"), "node": tfStr("web1"),
		"incus_instance": tfStr(name), "incus_project": tfStr(project),
	})
	agentState := agent.apply(ctx, agent.null(), agentConf)
	agentID := spire.AgentID(td, "shop", "web1")
	if got := agent.str(agentState, "agent_id"); got != agentID {
		t.Errorf("agent_id %s, want %s", got, agentID)
	}
	var ttl tftypes.Value = agent.values(agentState)["token_ttl"]
	if !ttl.Equal(tftypes.NewValue(tftypes.Number, 3600)) {
		t.Errorf("token_ttl %v, want the default 3600", ttl)
	}

	f, err := c.File(ctx, project, name, JoinTokenPath)
	if err != nil {
		t.Fatalf("the token file: %v", err)
	}
	if f.Type != api.FileTypeFile || f.Mode != 0o600 || f.UID != 0 || f.GID != 0 {
		t.Errorf("the token file: %s %o %d:%d, want a file 0600 root", f.Type, f.Mode, f.UID, f.GID)
	}
	if d, err := c.Stat(ctx, project, name, "/var/lib/switchyard/spire"); err != nil || d.Mode != 0o700 || d.UID != 0 {
		t.Errorf("the token's directory: %+v %v, want 0700 root", d, err)
	}
	token := strings.TrimSpace(string(f.Content))
	if len(token) < 16 {
		t.Fatalf("the token file holds %d bytes", len(token))
	}
	// The file's token is the one the server aliased to the agent ID.
	byToken, err := sc.List(ctx, "spiffe://"+td+"/spire/agent/join_token/"+token)
	if err != nil || len(byToken) != 1 || byToken[0].SpiffeID != agentID {
		t.Fatalf("the alias of the file's token: %+v %v", byToken, err)
	}

	if agentState = agent.read(ctx, agentState); agentState == nil {
		t.Fatal("read removed the agent")
	}

	entry := newTFResource(t, "switchyard_spire_entry")
	entryID := spire.EntryID("shop", "web1", "cart", "cart.service")
	entryConf := entry.config(map[string]tftypes.Value{
		"server": tfStr(srv.Addr), "entry_id": tfStr(entryID), "spiffe_id": tfStr(spire.WorkloadID(td, "shop", "web1", "cart")),
		"parent_id": tfStr(agentID), "selectors": tfStrList(spire.SystemdSelector("cart.service")),
	})
	entryState := entry.apply(ctx, entry.null(), entryConf)
	if entry.str(entryState, "id") != entryID {
		t.Errorf("entry id %s, want %s", entry.str(entryState, "id"), entryID)
	}
	got, ok, err := sc.Get(ctx, entryID)
	want := spire.Entry{ID: entryID, SpiffeID: spire.WorkloadID(td, "shop", "web1", "cart"), ParentID: agentID,
		Selectors: []string{"systemd:id:cart.service"}}
	if err != nil || !ok || !got.Equal(want) {
		t.Fatalf("the server's entry: %+v %v %v, want %+v", got, ok, err, want)
	}

	// A change made on the server is drift; an apply puts the entry back.
	changed := want
	changed.Selectors = []string{"systemd:id:other.service"}
	if _, err := sc.Ensure(ctx, changed); err != nil {
		t.Fatal(err)
	}
	entryState = entry.read(ctx, entryState)
	if sel := entry.list(entryState, "selectors"); len(sel) != 1 || sel[0] != "systemd:id:other.service" {
		t.Errorf("read after a change on the server: selectors %v", sel)
	}
	entryState = entry.apply(ctx, entryState, entryConf)
	if got, _, _ := sc.Get(ctx, entryID); !got.Equal(want) {
		t.Errorf("after the apply: %+v, want %+v", got, want)
	}

	entry.apply(ctx, entryState, nil)
	if _, ok, err := sc.Get(ctx, entryID); err != nil || ok {
		t.Errorf("entry after delete: %v %v", ok, err)
	}
	if entry.read(ctx, entryState) != nil {
		t.Error("read of a deleted entry kept it")
	}

	// The token file gone: read removes the agent (the next apply makes a new token).
	if err := c.DeleteFile(ctx, project, name, JoinTokenPath); err != nil {
		t.Fatal(err)
	}
	if agent.read(ctx, agentState) != nil {
		t.Error("read without the token file kept the agent")
	}
	agentState = agent.apply(ctx, agent.null(), agentConf)
	f2, err := c.File(ctx, project, name, JoinTokenPath)
	if err != nil || f2.Mode != 0o600 || strings.TrimSpace(string(f2.Content)) == token {
		t.Fatalf("the second token file: %v, mode %o, a new token %v", err, f2.Mode, strings.TrimSpace(string(f2.Content)) != token)
	}
	token2 := strings.TrimSpace(string(f2.Content))
	if aliases, err := sc.AgentAliases(ctx, agentID); err != nil || len(aliases) != 1 {
		t.Errorf("aliases after the second create: %v %v, want one", aliases, err)
	}
	if old, err := sc.List(ctx, "spiffe://"+td+"/spire/agent/join_token/"+token); err != nil || len(old) != 0 {
		t.Errorf("the first token's alias after the second create: %+v %v, want none", old, err)
	}

	agent.apply(ctx, agentState, nil)
	if _, err := c.Stat(ctx, project, name, JoinTokenPath); !api.IsNotFound(err) {
		t.Errorf("the token file after delete: %v, want not found", err)
	}
	if aliases, err := sc.AgentAliases(ctx, agentID); err != nil || len(aliases) != 0 {
		t.Errorf("aliases after delete: %v %v", aliases, err)
	}

	for _, tok := range []string{token, token2} {
		for _, r := range []*tfResource{agent, entry} {
			if bytes.Contains(r.seen.Bytes(), []byte(tok)) {
				t.Errorf("a join token is in what %s answered", r.name)
			}
		}
	}
	if agent.seen.Len() == 0 {
		t.Error("nothing seen")
	}
}
