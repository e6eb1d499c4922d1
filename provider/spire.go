package provider

import (
	"context"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchyard-nix/switchyard/spire"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// JoinTokenPath is where a node's SPIRE agent finds its join token (SPEC 7.1).
const JoinTokenPath = "/var/lib/switchyard/spire/join-token"

// DefaultTokenTTL is how long a join token is valid when token_ttl is not set.
const DefaultTokenTTL = time.Hour

// spireTimeout bounds one resource operation's calls to the SPIRE server.
const spireTimeout = time.Minute

// withSpire runs fn with a client of the SPIRE server API at server and a
// context bounded by spireTimeout; a server address that cannot be used is
// reported instead.
func withSpire(ctx context.Context, server string, diags *diag.Diagnostics, fn func(context.Context, *spire.Client)) {
	ctx, cancel := context.WithTimeout(ctx, spireTimeout)
	defer cancel()
	c, err := spire.Dial(ctx, server)
	if err != nil {
		diags.AddError("spire server", err.Error())
		return
	}
	defer c.Close()
	fn(ctx, c)
}

// spireAgentModel is switchyard_spire_agent's data. The join token is not in
// it: it goes from the server straight into the instance.
type spireAgentModel struct {
	ID            types.String `tfsdk:"id"`
	Server        types.String `tfsdk:"server"`
	TrustDomain   types.String `tfsdk:"trust_domain"`
	Group         types.String `tfsdk:"group"`
	Node          types.String `tfsdk:"node"`
	IncusInstance types.String `tfsdk:"incus_instance"`
	IncusProject  types.String `tfsdk:"incus_project"`
	TokenTTL      types.Int64  `tfsdk:"token_ttl"`
	AgentID       types.String `tfsdk:"agent_id"`
}

func (m *spireAgentModel) agentID() string {
	return spire.AgentID(m.TrustDomain.ValueString(), m.Group.ValueString(), m.Node.ValueString())
}

func (m *spireAgentModel) label() string {
	return "spire agent " + m.agentID() + " (incus instance " + m.IncusProject.ValueString() + "/" + m.IncusInstance.ValueString() + ")"
}

// spireAgent is the switchyard_spire_agent resource: a node's SPIRE agent
// identity. Create makes a join token aliased to the agent ID and pushes it
// into the node's instance; Delete removes the alias and the token file.
type spireAgent struct {
	c   *api.Client
	err error // the Incus remote could not be opened
}

func newSpireAgent() resource.Resource { return &spireAgent{} }

// Configure reaches the run's Incus remote with its client key, as every resource
// of the run does.
func (r *spireAgent) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	_, r.c, r.err = incusOf(req.ProviderData, &resp.Diagnostics)
}

var _ resource.Resource = (*spireAgent)(nil)

func (r *spireAgent) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_spire_agent"
}

func (r *spireAgent) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	required := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Required: true, PlanModifiers: replace, Description: desc}
	}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "A node's SPIRE agent identity: a join token created through the server API, aliased to the agent ID " +
			"(the parent of the node's workload entries), and pushed into the node's Incus instance at " + JoinTokenPath +
			" (mode 0600). The token is never in state, plan or output. Delete removes the alias entry and the token file.",
		Attributes: map[string]schema.Attribute{
			"server":         required("the SPIRE server API: unix:///<path of its socket>"),
			"trust_domain":   required("the trust domain"),
			"group":          required("the group (tenant) the node belongs to"),
			"node":           required("the node's name"),
			"incus_instance": required("the node's Incus instance"),
			"incus_project":  required("the instance's Incus project"),
			"token_ttl": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(int64(DefaultTokenTTL / time.Second)),
				Validators:  []validator.Int64{positiveTTL{}},
				Description: "seconds the join token is valid for until the agent uses it (default 3600); a change applies to the next token"},
			"id":       schema.StringAttribute{Computed: true, Description: "the agent ID", PlanModifiers: keep},
			"agent_id": schema.StringAttribute{Computed: true, Description: "spiffe://<trust domain>/switchyard/agent/<group>/<node>", PlanModifiers: keep},
		},
	}
}

func (r *spireAgent) usable(diags *diag.Diagnostics) bool { return usableIncus(r.c, r.err, diags) }

func (r *spireAgent) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m spireAgentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	fail := func(what string, err error) {
		resp.Diagnostics.AddError(m.label()+": "+what, fmt.Sprintf("%s: %s: %v", m.label(), what, err))
	}
	withSpire(ctx, m.Server.ValueString(), &resp.Diagnostics, func(ctx context.Context, sc *spire.Client) {
		if r.create(ctx, sc, &m, fail) {
			resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
		}
	})
}

// create makes the agent's join token and pushes it into the instance.
func (r *spireAgent) create(ctx context.Context, sc *spire.Client, m *spireAgentModel, fail func(string, error)) bool {
	project, name := m.IncusProject.ValueString(), m.IncusInstance.ValueString()
	// The instance first: a token for a node that cannot receive it is not made.
	if _, err := r.c.Instance(ctx, project, name); err != nil {
		fail("instance", err)
		return false
	}
	agentID := m.agentID()
	// An earlier token's alias (its file lost, its instance replaced) would
	// keep that token usable for this identity until it expires: it goes first.
	if err := sc.DeleteAgent(ctx, agentID); err != nil {
		fail("remove earlier join tokens' aliases", err)
		return false
	}
	token, err := sc.CreateJoinToken(ctx, agentID, time.Duration(m.TokenTTL.ValueInt64())*time.Second)
	if err != nil {
		fail("join token", err)
		return false
	}
	dir := path.Dir(JoinTokenPath)
	root := api.FileMeta{UID: 0, GID: 0, Mode: 0o700}
	err = r.c.MkdirAll(ctx, project, name, dir, root)
	if err == nil {
		err = r.c.PushFile(ctx, project, name, JoinTokenPath, []byte(token+"\n"), api.FileMeta{UID: 0, GID: 0, Mode: 0o600})
	}
	if err != nil {
		fail("push the join token", err)
		// A token nobody received must not stay usable.
		if err := sc.DeleteAgent(ctx, agentID); err != nil {
			fail("remove the unused join token's alias", err)
		}
		return false
	}
	m.ID = types.StringValue(agentID)
	m.AgentID = types.StringValue(agentID)
	return true
}

// Read removes the resource when the instance, the token file or the alias
// entry is gone, so that the next apply makes a new token.
func (r *spireAgent) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m spireAgentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	withSpire(ctx, m.Server.ValueString(), &resp.Diagnostics, func(ctx context.Context, sc *spire.Client) {
		_, err := r.c.Stat(ctx, m.IncusProject.ValueString(), m.IncusInstance.ValueString(), JoinTokenPath)
		if api.IsNotFound(err) {
			resp.State.RemoveResource(ctx)
			return
		}
		if err != nil {
			resp.Diagnostics.AddError(m.label()+": read the token file", fmt.Sprintf("%s: read the token file: %v", m.label(), err))
			return
		}
		aliases, err := sc.AgentAliases(ctx, m.agentID())
		if err != nil {
			resp.Diagnostics.AddError(m.label()+": read", fmt.Sprintf("%s: read: %v", m.label(), err))
			return
		}
		if len(aliases) == 0 {
			resp.State.RemoveResource(ctx)
			return
		}
		m.ID = types.StringValue(m.agentID())
		m.AgentID = m.ID
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	})
}

// Update only records a new token_ttl (every other attribute replaces): it
// applies to the next token.
func (r *spireAgent) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m spireAgentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	m.ID = types.StringValue(m.agentID())
	m.AgentID = m.ID
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete removes the agent's alias entries (a token not used yet then gives no
// identity) and the token file when the instance still exists.
func (r *spireAgent) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m spireAgentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	withSpire(ctx, m.Server.ValueString(), &resp.Diagnostics, func(ctx context.Context, sc *spire.Client) {
		if err := sc.DeleteAgent(ctx, m.agentID()); err != nil {
			resp.Diagnostics.AddError(m.label()+": delete", fmt.Sprintf("%s: delete: %v", m.label(), err))
			return
		}
		err := r.c.DeleteFile(ctx, m.IncusProject.ValueString(), m.IncusInstance.ValueString(), JoinTokenPath)
		if err != nil && !api.IsNotFound(err) {
			resp.Diagnostics.AddError(m.label()+": delete the token file", fmt.Sprintf("%s: delete the token file: %v", m.label(), err))
		}
	})
}

// positiveTTL accepts a token_ttl SPIRE accepts: 1 second to 2^31-1.
type positiveTTL struct{}

func (positiveTTL) Description(context.Context) string { return "from 1 to 2147483647 seconds" }

func (v positiveTTL) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v positiveTTL) ValidateInt64(ctx context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if n := req.ConfigValue.ValueInt64(); n < 1 || n > 1<<31-1 {
		resp.Diagnostics.AddAttributeError(req.Path, "token_ttl", fmt.Sprintf("%d: want %s", n, v.Description(ctx)))
	}
}

// spireEntryModel is switchyard_spire_entry's data.
type spireEntryModel struct {
	ID        types.String `tfsdk:"id"`
	Server    types.String `tfsdk:"server"`
	EntryID   types.String `tfsdk:"entry_id"`
	SpiffeID  types.String `tfsdk:"spiffe_id"`
	ParentID  types.String `tfsdk:"parent_id"`
	Selectors types.List   `tfsdk:"selectors"`
}

func (m *spireEntryModel) label() string {
	return "spire entry " + m.EntryID.ValueString() + " (" + m.SpiffeID.ValueString() + ")"
}

func (m *spireEntryModel) entry(ctx context.Context) (spire.Entry, diag.Diagnostics) {
	e := spire.Entry{ID: m.EntryID.ValueString(), SpiffeID: m.SpiffeID.ValueString(), ParentID: m.ParentID.ValueString()}
	diags := m.Selectors.ElementsAs(ctx, &e.Selectors, false)
	return e, diags
}

// spireEntry is the switchyard_spire_entry resource: a registration entry of
// an application unit on a node, under an ID switchyard derives.
type spireEntry struct{}

func newSpireEntry() resource.Resource { return &spireEntry{} }

var _ resource.Resource = (*spireEntry)(nil)

func (r *spireEntry) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_spire_entry"
}

func (r *spireEntry) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "A SPIRE registration entry under a derived ID: an apply makes it exist as given (created, or updated " +
			"in place), a change made on the server shows as drift, and delete deletes exactly it.",
		Attributes: map[string]schema.Attribute{
			"server":    schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "the SPIRE server API: unix:///<path of its socket>"},
			"entry_id":  schema.StringAttribute{Required: true, PlanModifiers: replace, Description: "the entry's ID (derived from group, node, application and unit)"},
			"spiffe_id": schema.StringAttribute{Required: true, Description: "spiffe://<trust domain>/<group>/<node>/<application>"},
			"parent_id": schema.StringAttribute{Required: true, Description: "the node's agent ID"},
			"selectors": schema.ListAttribute{Required: true, ElementType: types.StringType,
				Description: "workload selectors, \"<type>:<value>\" (systemd:id:<unit>)"},
			"id": schema.StringAttribute{Computed: true, Description: "the entry's ID",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (r *spireEntry) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m spireEntryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	r.ensure(ctx, &m, &resp.Diagnostics)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

func (r *spireEntry) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m spireEntryModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	r.ensure(ctx, &m, &resp.Diagnostics)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	}
}

// ensure makes the entry of m exist as m says.
func (r *spireEntry) ensure(ctx context.Context, m *spireEntryModel, diags *diag.Diagnostics) {
	if diags.HasError() {
		return
	}
	e, d := m.entry(ctx)
	if diags.Append(d...); diags.HasError() {
		return
	}
	withSpire(ctx, m.Server.ValueString(), diags, func(ctx context.Context, sc *spire.Client) {
		if _, err := sc.Ensure(ctx, e); err != nil {
			diags.AddError(m.label()+": apply", err.Error())
			return
		}
		m.ID = m.EntryID
	})
}

// Read shows what the server has: an entry gone is removed from state (the
// next apply creates it again), one changed on the server shows as drift.
func (r *spireEntry) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m spireEntryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	withSpire(ctx, m.Server.ValueString(), &resp.Diagnostics, func(ctx context.Context, sc *spire.Client) {
		have, ok, err := sc.Get(ctx, m.EntryID.ValueString())
		if err != nil {
			resp.Diagnostics.AddError(m.label()+": read", err.Error())
			return
		}
		if !ok {
			resp.State.RemoveResource(ctx)
			return
		}
		was, d := m.entry(ctx)
		resp.Diagnostics.Append(d...)
		m.ID = m.EntryID
		m.SpiffeID = types.StringValue(have.SpiffeID)
		m.ParentID = types.StringValue(have.ParentID)
		// The server keeps selectors as a set: the configured order stays when
		// the set is the same, so that order alone is no drift.
		if !sameSet(was.Selectors, have.Selectors) {
			m.Selectors, d = types.ListValueFrom(ctx, types.StringType, have.Selectors)
			resp.Diagnostics.Append(d...)
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
	})
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func (r *spireEntry) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m spireEntryModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	withSpire(ctx, m.Server.ValueString(), &resp.Diagnostics, func(ctx context.Context, sc *spire.Client) {
		if err := sc.Delete(ctx, m.EntryID.ValueString()); err != nil {
			resp.Diagnostics.AddError(m.label()+": delete", err.Error())
		}
	})
}
