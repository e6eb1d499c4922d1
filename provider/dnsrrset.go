package provider

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/switchyard-nix/switchyard/dnsupdate"
	"github.com/switchyard-nix/switchyard/provider/contract"
)

// dnsRRSetModel is switchyard_dns_rrset's data.
type dnsRRSetModel struct {
	ID      types.String `tfsdk:"id"`
	Server  types.String `tfsdk:"server"`
	Zone    types.String `tfsdk:"zone"`
	Name    types.String `tfsdk:"name"`
	Type    types.String `tfsdk:"type"`
	TTL     types.Int64  `tfsdk:"ttl"`
	Records types.List   `tfsdk:"records"`
}

// dnsTimeout bounds one exchange with the DNS server.
const dnsTimeout = 15 * time.Second

// dnsRRSet is the switchyard_dns_rrset resource: one RRset of a zone, written
// whole over RFC 2136 updates signed with the run's TSIG key (contract.Run.DNSKeyFile).
// switchyard owns the RRset: read reports what the server has (a hand edit is
// drift), apply puts it back, delete removes exactly it.
type dnsRRSet struct{ configured }

func newDNSRRSet() resource.Resource { return &dnsRRSet{} }

var (
	_ resource.Resource                   = (*dnsRRSet)(nil)
	_ resource.ResourceWithValidateConfig = (*dnsRRSet)(nil)
)

func (r *dnsRRSet) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_dns_rrset"
}

func (r *dnsRRSet) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "One DNS RRset, owned whole by switchyard: written with RFC 2136 updates signed with TSIG (the key file " +
			"the switchyard CLI hands the provider) to the zone's primary server. A TTL change is made in place; a record changed by " +
			"hand shows as drift and apply puts it back; delete removes exactly this RRset.",
		Attributes: map[string]schema.Attribute{
			"server": schema.StringAttribute{Required: true, Description: "the zone's primary server, host:port"},
			"zone":   schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "the zone, a lower-case FQDN with the trailing dot"},
			"name":   schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "the RRset's owner name, a lower-case FQDN in the zone"},
			"type":   schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "the record type: A, AAAA, CNAME, TXT, MX, NS, SRV, CAA or PTR"},
			"ttl":    schema.Int64Attribute{Required: true, Description: "the RRset's TTL in seconds"},
			"records": schema.ListAttribute{Required: true, ElementType: types.StringType,
				Description: "the records' data in canonical presentation form (dnsupdate.Canonical), sorted"},
			"id": schema.StringAttribute{Computed: true, Description: "<zone> <name> <type>",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

// label names the RRset in diagnostics.
func (m *dnsRRSetModel) label() string {
	return "dns rrset " + m.Name.ValueString() + " " + m.Type.ValueString()
}

// ValidateConfig checks what is known of the configuration: names are
// lower-case FQDNs, the name is in the zone, the type is supported, the records
// canonical and sorted (else state, which holds what the server answers, would
// never match the configuration).
func (r *dnsRRSet) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m dnsRRSetModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	bad := func(attr, why string) { resp.Diagnostics.AddAttributeError(path.Root(attr), "invalid "+attr, why) }
	known := func(v types.String) bool { return !v.IsNull() && !v.IsUnknown() }
	for attr, v := range map[string]types.String{"zone": m.Zone, "name": m.Name} {
		if known(v) && v.ValueString() != dnsupdate.CanonicalName(v.ValueString()) {
			bad(attr, fmt.Sprintf("%q is not a lower-case FQDN with the trailing dot (%q)", v.ValueString(), dnsupdate.CanonicalName(v.ValueString())))
		}
	}
	if known(m.Zone) && known(m.Name) {
		zone, name := m.Zone.ValueString(), m.Name.ValueString()
		if name != zone && !strings.HasSuffix(name, "."+zone) && zone != "." {
			bad("name", fmt.Sprintf("%s is not in zone %s", name, zone))
		}
	}
	if known(m.Type) && (!dnsupdate.Supported(m.Type.ValueString()) || m.Type.ValueString() != strings.ToUpper(m.Type.ValueString())) {
		bad("type", fmt.Sprintf("%q is not a supported record type in upper case", m.Type.ValueString()))
	}
	if !m.TTL.IsNull() && !m.TTL.IsUnknown() && (m.TTL.ValueInt64() < 0 || m.TTL.ValueInt64() > math.MaxInt32) {
		bad("ttl", fmt.Sprintf("%d is not a TTL (0 to %d)", m.TTL.ValueInt64(), math.MaxInt32))
	}
	if m.Records.IsNull() || m.Records.IsUnknown() || !known(m.Type) {
		return
	}
	for _, e := range m.Records.Elements() {
		if e.IsUnknown() {
			return
		}
	}
	var recs []string
	resp.Diagnostics.Append(m.Records.ElementsAs(ctx, &recs, false)...)
	for _, rec := range recs {
		if !dnsupdate.IsCanonical(m.Type.ValueString(), rec) {
			bad("records", fmt.Sprintf("%s record %q is not in canonical form (dnsupdate.Canonical)", m.Type.ValueString(), rec))
		}
	}
	if !slices.IsSorted(recs) || len(slices.Compact(slices.Clone(recs))) != len(recs) {
		bad("records", "the records are not sorted and unique")
	}
}

// client is m's DNS client for the run of the configured provider.
func (r *dnsRRSet) client(m *dnsRRSetModel, diags *diag.Diagnostics) *dnsupdate.Client {
	s := r.session(diags)
	if s == nil {
		return nil
	}
	return m.client(s.run, diags)
}

// client is the DNS client of the RRset's server with the run's TSIG key.
// Diagnostics never show the key file's path.
func (m *dnsRRSetModel) client(run contract.Run, diags *diag.Diagnostics) *dnsupdate.Client {
	file := run.DNSKeyFile
	if file == "" {
		diags.AddError(m.label()+": no TSIG key",
			fmt.Sprintf("%s: the run has no TSIG key: the switchyard CLI hands the provider the TSIG key file (dnsTsigKeyFile) of the DNS server %s",
				m.label(), m.Server.ValueString()))
		return nil
	}
	k, err := dnsupdate.ReadKeyFile(file)
	if err != nil {
		diags.AddError(m.label()+": TSIG key", fmt.Sprintf("%s: %v", m.label(), err))
		return nil
	}
	return &dnsupdate.Client{Server: m.Server.ValueString(), Key: k, Timeout: dnsTimeout}
}

// want is the RRset the model describes.
func (m *dnsRRSetModel) want(ctx context.Context, diags *diag.Diagnostics) (dnsupdate.RRset, bool) {
	var recs []string
	diags.Append(m.Records.ElementsAs(ctx, &recs, false)...)
	ttl := m.TTL.ValueInt64()
	if ttl < 0 || ttl > math.MaxInt32 {
		diags.AddError(m.label()+": ttl", fmt.Sprintf("%s: ttl %d out of range", m.label(), ttl))
	}
	return dnsupdate.RRset{Name: m.Name.ValueString(), Type: m.Type.ValueString(), TTL: uint32(ttl), Records: recs}, !diags.HasError()
}

// fail adds an error diagnostic naming the RRset and carrying err (the
// server's answer among it).
func (m *dnsRRSetModel) fail(diags *diag.Diagnostics, what string, err error) {
	diags.AddError(m.label()+": "+what, fmt.Sprintf("%s: %s: %v", m.label(), what, err))
}

// apply makes the server's RRset the model's: a read, then one update when
// the server differs, none when it already has it.
func (r *dnsRRSet) apply(ctx context.Context, m *dnsRRSetModel, diags *diag.Diagnostics) {
	c := r.client(m, diags)
	want, ok := m.want(ctx, diags)
	if c == nil || !ok {
		return
	}
	zone := m.Zone.ValueString()
	have, found, err := c.Read(ctx, zone, want.Name, want.Type)
	if err != nil {
		m.fail(diags, "read", err)
		return
	}
	var prior *dnsupdate.RRset
	if found {
		prior = &have
	}
	sent, err := c.Apply(ctx, zone, prior, want)
	if err != nil {
		m.fail(diags, "update", err)
		return
	}
	if sent {
		tflog.Info(ctx, m.label()+": updated")
	}
	m.ID = types.StringValue(zone + " " + want.Name + " " + want.Type)
}

func (r *dnsRRSet) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m dnsRRSetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.apply(ctx, &m, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *dnsRRSet) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m dnsRRSetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	r.apply(ctx, &m, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Read makes the state what the server has: its TTL and records, so a hand
// edit shows as drift. An RRset gone from the server keeps its resource with no
// records, so the plan restores it.
func (r *dnsRRSet) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m dnsRRSetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c := r.client(&m, &resp.Diagnostics)
	if c == nil {
		return
	}
	have, found, err := c.Read(ctx, m.Zone.ValueString(), m.Name.ValueString(), m.Type.ValueString())
	if err != nil {
		m.fail(&resp.Diagnostics, "read", err)
		return
	}
	recs := []string{}
	if found {
		recs = have.Records
		m.TTL = types.Int64Value(int64(have.TTL))
	}
	list, diags := types.ListValueFrom(ctx, types.StringType, recs)
	resp.Diagnostics.Append(diags...)
	m.Records = list
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete removes exactly this RRset; one already gone is fine.
func (r *dnsRRSet) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m dnsRRSetModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c := r.client(&m, &resp.Diagnostics)
	if c == nil {
		return
	}
	if err := c.Delete(ctx, m.Zone.ValueString(), m.Name.ValueString(), m.Type.ValueString()); err != nil {
		m.fail(&resp.Diagnostics, "delete", err)
	}
}
