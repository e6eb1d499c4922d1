package provider

import (
	"context"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/switchyard-nix/switchyard/dnsupdate"
	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/testbed/dnsserver"
)

// switchyard_dns_rrset's schema (issue 12 item 3).
func TestDNSRRSetSchema(t *testing.T) {
	_, schemas := providerSchemas(t)
	str := tftypes.String
	checkAttrs(t, "switchyard_dns_rrset", schemas["switchyard_dns_rrset"], map[string]wantAttr{
		"id":      {"computed", str},
		"server":  {"required", str},
		"zone":    {"required", str},
		"name":    {"required", str},
		"type":    {"required", str},
		"ttl":     {"required", tftypes.Number},
		"records": {"required", tftypes.List{ElementType: str}},
	})
}

var rrsetType = tftypes.Object{AttributeTypes: map[string]tftypes.Type{
	"id": tftypes.String, "server": tftypes.String, "zone": tftypes.String, "name": tftypes.String,
	"type": tftypes.String, "ttl": tftypes.Number, "records": tftypes.List{ElementType: tftypes.String},
}}

// rrsetDriver drives switchyard_dns_rrset through the provider's plugin
// protocol server, as OpenTofu does: validate, plan, apply, read.
type rrsetDriver struct {
	t   *testing.T
	srv tfprotov6.ProviderServer
}

func newRRSetDriver(t *testing.T) *rrsetDriver {
	srv, err := providerserver.NewProtocol6WithError(New())()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := srv.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{}); err != nil {
		t.Fatal(err)
	}
	cfg, _ := tfprotov6.NewDynamicValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{}}, tftypes.NewValue(tftypes.Object{AttributeTypes: map[string]tftypes.Type{}}, map[string]tftypes.Value{}))
	resp, err := srv.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Fatalf("configure: %s: %s", d.Summary, d.Detail)
	}
	return &rrsetDriver{t: t, srv: srv}
}

type rrsetConfig struct {
	server, zone, name, typ string
	ttl                     int64
	records                 []string
}

func (c rrsetConfig) value(id tftypes.Value) tftypes.Value {
	recs := make([]tftypes.Value, len(c.records))
	for i, r := range c.records {
		recs[i] = tftypes.NewValue(tftypes.String, r)
	}
	return tftypes.NewValue(rrsetType, map[string]tftypes.Value{
		"id": id, "server": tftypes.NewValue(tftypes.String, c.server), "zone": tftypes.NewValue(tftypes.String, c.zone),
		"name": tftypes.NewValue(tftypes.String, c.name), "type": tftypes.NewValue(tftypes.String, c.typ),
		"ttl":     tftypes.NewValue(tftypes.Number, big.NewFloat(float64(c.ttl))),
		"records": tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, recs),
	})
}

var nullRRSet = tftypes.NewValue(rrsetType, nil)

func (d *rrsetDriver) dv(v tftypes.Value) *tfprotov6.DynamicValue {
	d.t.Helper()
	out, err := tfprotov6.NewDynamicValue(rrsetType, v)
	if err != nil {
		d.t.Fatal(err)
	}
	return &out
}

func (d *rrsetDriver) value(dv *tfprotov6.DynamicValue) tftypes.Value {
	d.t.Helper()
	if dv == nil {
		return nullRRSet
	}
	v, err := dv.Unmarshal(rrsetType)
	if err != nil {
		d.t.Fatal(err)
	}
	return v
}

// diagErrors are the error diagnostics' texts.
func diagErrors(diags []*tfprotov6.Diagnostic) string {
	var out []string
	for _, d := range diags {
		if d.Severity == tfprotov6.DiagnosticSeverityError {
			out = append(out, d.Summary+": "+d.Detail)
		}
	}
	return strings.Join(out, "\n")
}

// validate gives the config's validation errors.
func (d *rrsetDriver) validate(c rrsetConfig) string {
	resp, err := d.srv.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{
		TypeName: "switchyard_dns_rrset", Config: d.dv(c.value(tftypes.NewValue(tftypes.String, nil)))})
	if err != nil {
		d.t.Fatal(err)
	}
	return diagErrors(resp.Diagnostics)
}

// plan plans config c over prior; it gives the planned state and whether it
// requires a replacement.
func (d *rrsetDriver) plan(prior tftypes.Value, c rrsetConfig) (tftypes.Value, bool) {
	d.t.Helper()
	if errs := d.validate(c); errs != "" {
		d.t.Fatalf("validate: %s", errs)
	}
	id := tftypes.NewValue(tftypes.String, nil)
	if !prior.IsNull() {
		var m map[string]tftypes.Value
		_ = prior.As(&m)
		id = m["id"]
	}
	resp, err := d.srv.PlanResourceChange(context.Background(), &tfprotov6.PlanResourceChangeRequest{
		TypeName: "switchyard_dns_rrset", PriorState: d.dv(prior), ProposedNewState: d.dv(c.value(id)),
		Config: d.dv(c.value(tftypes.NewValue(tftypes.String, nil)))})
	if err != nil {
		d.t.Fatal(err)
	}
	if errs := diagErrors(resp.Diagnostics); errs != "" {
		d.t.Fatalf("plan: %s", errs)
	}
	return d.value(resp.PlannedState), len(resp.RequiresReplace) > 0
}

// apply applies planned over prior (planned null: delete); it gives the new
// state and the error diagnostics.
func (d *rrsetDriver) apply(prior, planned tftypes.Value, c *rrsetConfig) (tftypes.Value, string) {
	d.t.Helper()
	cfg := nullRRSet
	if c != nil {
		cfg = c.value(tftypes.NewValue(tftypes.String, nil))
	}
	resp, err := d.srv.ApplyResourceChange(context.Background(), &tfprotov6.ApplyResourceChangeRequest{
		TypeName: "switchyard_dns_rrset", PriorState: d.dv(prior), PlannedState: d.dv(planned), Config: d.dv(cfg)})
	if err != nil {
		d.t.Fatal(err)
	}
	return d.value(resp.NewState), diagErrors(resp.Diagnostics)
}

// read refreshes state.
func (d *rrsetDriver) read(state tftypes.Value) (tftypes.Value, string) {
	d.t.Helper()
	resp, err := d.srv.ReadResource(context.Background(), &tfprotov6.ReadResourceRequest{
		TypeName: "switchyard_dns_rrset", CurrentState: d.dv(state)})
	if err != nil {
		d.t.Fatal(err)
	}
	return d.value(resp.NewState), diagErrors(resp.Diagnostics)
}

// stateOf gives a state's ttl and records.
func stateOf(t *testing.T, v tftypes.Value) (int64, []string, string) {
	t.Helper()
	var m map[string]tftypes.Value
	if err := v.As(&m); err != nil {
		t.Fatal(err)
	}
	var ttl big.Float
	if err := m["ttl"].As(&ttl); err != nil {
		t.Fatal(err)
	}
	n, _ := ttl.Int64()
	var elems []tftypes.Value
	if err := m["records"].As(&elems); err != nil {
		t.Fatal(err)
	}
	recs := []string{}
	for _, e := range elems {
		var s string
		_ = e.As(&s)
		recs = append(recs, s)
	}
	var id string
	_ = m["id"].As(&id)
	return n, recs, id
}

// switchyard_dns_rrset's life against real bind9 and knot, driven through the
// provider's plugin protocol (issue 12 item 3): create; a plan with nothing
// changed; a hand edit seen by read as drift and put back by apply; a TTL change
// in place; an update the server already has sends nothing; delete removes
// exactly the RRset; an RRset gone from the server reads as no records; a
// wrong key or an unreachable server fails naming the RRset and the server's
// answer; no key file is a clear error.
func TestDNSRRSetResource(t *testing.T) {
	for _, kind := range dnsserver.Kinds() {
		t.Run(kind, func(t *testing.T) {
			s := dnsserver.Start(t, kind, "tenant.test", "hmac-sha384")
			setRun(t, contract.Run{DNSKeyFile: s.KeyFile})
			d := newRRSetDriver(t)
			canon := func(typ string, values ...string) []string {
				var out []string
				for _, v := range values {
					c, err := dnsupdate.Canonical(typ, v, s.Zone)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, c)
				}
				slices.Sort(out)
				return out
			}
			cfg := rrsetConfig{server: s.Addr, zone: s.Zone, name: "www.tenant.test.", typ: "A", ttl: 300,
				records: canon("A", "192.0.2.1", "192.0.2.2")}

			// Validation: records must be canonical and sorted, names FQDNs in the zone.
			for _, bad := range []func(c *rrsetConfig){
				func(c *rrsetConfig) { c.records = []string{"192.0.2.2", "192.0.2.1"} },
				func(c *rrsetConfig) { c.typ, c.records = "MX", []string{"10 mail"} },
				func(c *rrsetConfig) { c.name = "www.other.test." },
				func(c *rrsetConfig) { c.name = "WWW.tenant.test" },
				func(c *rrsetConfig) { c.typ = "HINFO" },
				func(c *rrsetConfig) { c.ttl = -1 },
			} {
				c := cfg
				bad(&c)
				if errs := d.validate(c); errs == "" {
					t.Errorf("config %+v validated", c)
				}
			}

			planned, _ := d.plan(nullRRSet, cfg)
			state, errs := d.apply(nullRRSet, planned, &cfg)
			if errs != "" {
				t.Fatalf("create: %s", errs)
			}
			if ttl, recs, id := stateOf(t, state); ttl != 300 || !slices.Equal(recs, cfg.records) || id != "tenant.test. www.tenant.test. A" {
				t.Fatalf("state after create: %d %v %q", ttl, recs, id)
			}
			if ttl, recs := s.Query(t, cfg.name, "A"); ttl != 300 || !slices.Equal(recs, cfg.records) {
				t.Fatalf("server after create: %d %v", ttl, recs)
			}

			// Refresh and plan with nothing changed: no change planned.
			state, errs = d.read(state)
			if errs != "" {
				t.Fatal(errs)
			}
			if p, _ := d.plan(state, cfg); !p.Equal(state) {
				t.Errorf("nothing changed but the plan is %v over %v", p, state)
			}

			// A hand edit: read shows it, the plan restores it, apply puts it back.
			s.NSUpdate(t, "update delete www.tenant.test. A 192.0.2.2\nupdate add www.tenant.test. 300 A 192.0.2.66\n")
			state, errs = d.read(state)
			if errs != "" {
				t.Fatal(errs)
			}
			if _, recs, _ := stateOf(t, state); !slices.Equal(recs, []string{"192.0.2.1", "192.0.2.66"}) {
				t.Fatalf("state after the hand edit: %v", recs)
			}
			planned, replace := d.plan(state, cfg)
			if replace || planned.Equal(state) {
				t.Fatalf("the plan does not restore the records in place: replace %v", replace)
			}
			if state, errs = d.apply(state, planned, &cfg); errs != "" {
				t.Fatal(errs)
			}
			if _, recs := s.Query(t, cfg.name, "A"); !slices.Equal(recs, cfg.records) {
				t.Fatalf("server after the restore: %v", recs)
			}

			// A TTL change, in place.
			cfg2 := cfg
			cfg2.ttl = 60
			planned, replace = d.plan(state, cfg2)
			if replace {
				t.Fatal("a TTL change plans a replacement")
			}
			if state, errs = d.apply(state, planned, &cfg2); errs != "" {
				t.Fatal(errs)
			}
			if ttl, recs := s.Query(t, cfg.name, "A"); ttl != 60 || !slices.Equal(recs, cfg.records) {
				t.Fatalf("server after the TTL change: %d %v", ttl, recs)
			}

			// An update whose result the server already has (a stale prior
			// state) sends nothing.
			before := s.Updates(t)
			if _, errs = d.apply(state, planned, &cfg2); errs != "" {
				t.Fatal(errs)
			}
			if n := s.Updates(t); n != before {
				t.Errorf("an apply the server already had sent %d updates", n-before)
			}

			// A name change replaces; the other RRset of the zone is untouched by
			// the delete.
			other := rrsetConfig{server: s.Addr, zone: s.Zone, name: "tenant.test.", typ: "TXT", ttl: 120,
				records: canon("TXT", "v=spf1 -all", strings.Repeat("z", 300))}
			op, _ := d.plan(nullRRSet, other)
			otherState, errs := d.apply(nullRRSet, op, &other)
			if errs != "" {
				t.Fatal(errs)
			}
			renamed := cfg2
			renamed.name = "web.tenant.test."
			if _, replace := d.plan(state, renamed); !replace {
				t.Error("a name change does not plan a replacement")
			}

			// Delete removes exactly the RRset; again is fine.
			if _, errs = d.apply(state, nullRRSet, nil); errs != "" {
				t.Fatal(errs)
			}
			if _, recs := s.Query(t, cfg.name, "A"); len(recs) != 0 {
				t.Fatalf("server after delete: %v", recs)
			}
			if _, recs := s.Query(t, other.name, "TXT"); !slices.Equal(recs, other.records) {
				t.Fatalf("delete of the A RRset changed the TXT one: %v", recs)
			}
			if _, errs = d.apply(state, nullRRSet, nil); errs != "" {
				t.Fatalf("delete of a deleted RRset: %s", errs)
			}

			// Gone from the server: state keeps the resource with no records.
			gone, errs := d.read(state)
			if errs != "" || gone.IsNull() {
				t.Fatalf("read of a deleted RRset: %v %s", gone, errs)
			}
			if _, recs, _ := stateOf(t, gone); len(recs) != 0 {
				t.Fatalf("read of a deleted RRset: records %v", recs)
			}
			if p, _ := d.plan(gone, cfg2); p.Equal(gone) {
				t.Error("the plan does not restore a deleted RRset")
			}

			// A wrong key: the apply fails naming the RRset and the answer.
			setRun(t, contract.Run{DNSKeyFile: writeWrongKey(t, s.Key.Name)})
			d = newRRSetDriver(t) // the provider reads its run when it is configured
			_, errs = d.apply(otherState, mustPlan(d, otherState, rrsetConfig{server: s.Addr, zone: s.Zone, name: other.name,
				typ: "TXT", ttl: 120, records: canon("TXT", "changed")}), &other)
			if !strings.Contains(errs, "dns rrset tenant.test. TXT") || !strings.Contains(errs, "NOTAUTH") || !strings.Contains(errs, "BADSIG") {
				t.Errorf("wrong key: %q", errs)
			}
			t.Log(errs)
			if strings.Contains(errs, "wrong-key") {
				t.Errorf("the error shows the key file's path: %q", errs)
			}
			if _, recs := s.Query(t, other.name, "TXT"); !slices.Equal(recs, other.records) {
				t.Errorf("the refused update changed the server: %v", recs)
			}

			// No key file.
			setRun(t, contract.Run{})
			d = newRRSetDriver(t)
			if _, errs = d.read(otherState); !strings.Contains(errs, "no TSIG key") {
				t.Errorf("no key file: %q", errs)
			}
			t.Log(errs)
		})
	}
}

func mustPlan(d *rrsetDriver, prior tftypes.Value, c rrsetConfig) tftypes.Value {
	p, _ := d.plan(prior, c)
	return p
}

// writeWrongKey writes a key file with the server's key name and another secret.
func writeWrongKey(t *testing.T, name string) string {
	p := t.TempDir() + "/wrong-key.conf"
	text := `key "` + strings.TrimSuffix(name, ".") + `" { algorithm hmac-sha384; secret "d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldC13cm9uZyE="; };`
	if err := writeFile0600(p, text); err != nil {
		t.Fatal(err)
	}
	return p
}

// An unreachable server fails read naming the RRset and the server.
func TestDNSRRSetUnreachable(t *testing.T) {
	p := t.TempDir() + "/key.conf"
	if err := writeFile0600(p, `key "k" { algorithm hmac-sha256; secret "c2VjcmV0"; };`); err != nil {
		t.Fatal(err)
	}
	setRun(t, contract.Run{DNSKeyFile: p})
	d := newRRSetDriver(t)
	// A loopback port nothing listens on: a listener opened and closed.
	addr := closedPort(t)
	state := rrsetConfig{server: addr, zone: "tenant.test.", name: "www.tenant.test.", typ: "A", ttl: 60,
		records: []string{"192.0.2.1"}}.value(tftypes.NewValue(tftypes.String, "tenant.test. www.tenant.test. A"))
	_, errs := d.read(state)
	t.Log(errs)
	if !strings.Contains(errs, "dns rrset www.tenant.test. A") || !strings.Contains(errs, addr) {
		t.Errorf("unreachable server: %q", errs)
	}
}

func writeFile0600(p, text string) error { return os.WriteFile(p, []byte(text), 0o600) }

func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
