package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/transports"
	"github.com/switchyard-nix/switchyard/verdict"
)

// verdictModel is switchyard_verdict's data.
type verdictModel struct {
	ID            types.String `tfsdk:"id"`
	Node          types.String `tfsdk:"node"`
	IncusInstance types.String `tfsdk:"incus_instance"`
	IncusProject  types.String `tfsdk:"incus_project"`
	Deployment    types.String `tfsdk:"deployment"`
	Identity      types.String `tfsdk:"identity"`

	Toplevel types.String `tfsdk:"toplevel"`
	Verdict  types.String `tfsdk:"verdict"`
	OK       types.Bool   `tfsdk:"ok"`
	ExitCode types.Int64  `tfsdk:"exit_code"`
}

// verdictPass is the switchyard_verdict resource: the verdict-only pass (chain gate,
// sweep, verdict) on an Incus node, run by tf-incus-operator once the node's identity
// exists, so units that wait for it are judged (SPEC 7.1). Its verdict is the node's.
// It runs again when the deployment or the identity it follows changes, and after a
// failed verdict; it changes nothing but restarting the failed units it sweeps, and
// its delete forgets it.
type verdictPass struct{ configured }

func newVerdict() resource.Resource { return &verdictPass{} }

var (
	_ resource.Resource               = (*verdictPass)(nil)
	_ resource.ResourceWithModifyPlan = (*verdictPass)(nil)
)

func (r *verdictPass) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_verdict"
}

func (r *verdictPass) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "The verdict-only pass on a node of the local Incus daemon after what it waits for (its workload " +
			"identity) exists: the node's verdict. Delete forgets it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "the node's name",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"node": schema.StringAttribute{Required: true, Description: "the node's name",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"incus_instance": schema.StringAttribute{Required: true, Description: "the node's Incus instance"},
			"incus_project":  schema.StringAttribute{Required: true, Description: "the instance's Incus project"},
			"deployment": schema.StringAttribute{Required: true,
				Description: "the deploy this pass follows (a digest of its verdict): a new deploy runs the pass again"},
			"identity": schema.StringAttribute{Required: true,
				Description: "what the node waited for (its agent and registration entries): a change runs the pass again"},
			"toplevel":  schema.StringAttribute{Computed: true, Description: "the toplevel the node runs"},
			"verdict":   schema.StringAttribute{Computed: true, Description: "the pass's verdict (JSON): the node's verdict"},
			"ok":        schema.BoolAttribute{Computed: true, Description: "whether the verdict passed"},
			"exit_code": schema.Int64Attribute{Computed: true, Description: "the pass's exit code (SPEC 2.1)"},
		},
	}
}

// ModifyPlan runs the pass again after a failed verdict, as a deployment is deployed
// again: its computed attributes become unknown.
func (r *verdictPass) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	retryFailed(ctx, req, resp, "toplevel", "verdict")
}

func (r *verdictPass) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	judgePlanned(ctx, r.session(&resp.Diagnostics), req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *verdictPass) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	judgePlanned(ctx, r.session(&resp.Diagnostics), req.Plan, &resp.State, &resp.Diagnostics)
}

// judgePlanned runs the pass of the planned node and sets the state, also when the
// verdict failed: that verdict is the node's, recorded in state.
func judgePlanned(ctx context.Context, s *session, plan tfsdk.Plan, state *tfsdk.State, diags *diag.Diagnostics) {
	var m verdictModel
	diags.Append(plan.Get(ctx, &m)...)
	if s == nil || diags.HasError() {
		return
	}
	m.judge(ctx, s, func(summary, detail string) { diags.AddError(summary, detail) })
	diags.Append(state.Set(ctx, &m)...)
}

// Read keeps the state: the verdict is the pass's, read when it ran.
func (r *verdictPass) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// Delete forgets the pass.
func (r *verdictPass) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// judge runs the verdict-only pass and records its verdict; a failed one is
// reported through fail, naming the node.
func (m *verdictModel) judge(ctx context.Context, s *session, fail func(summary, detail string)) {
	node := m.Node.ValueString()
	m.ID = types.StringValue(node)
	record := func(v verdict.Verdict, code int) {
		v.ExitCode = code
		b, _ := v.MarshalJSON()
		m.Toplevel = types.StringValue(v.Toplevel)
		m.Verdict = types.StringValue(string(b))
		m.OK = types.BoolValue(code == exitcode.OK)
		m.ExitCode = types.Int64Value(int64(code))
	}
	refuse := func(err error) {
		record(verdict.Verdict{Node: node, Pass: verdict.PassVerdictOnly, Reasons: []string{err.Error()}}, exitcode.Refused)
		fail(node+": verdict refused", fmt.Sprintf("%s: %v", node, err))
	}
	cfg, err := s.deploy, s.deployErr
	if err != nil {
		refuse(err)
		return
	}
	if cfg.Mode == effects.ModeBoot {
		// apply --mode boot activates nothing and judges nothing: the node still runs
		// the generation before, which is not the one this run deployed. The pass
		// records that it did not judge (readStates then reports the deployment's).
		record(verdict.Verdict{Node: node, Pass: verdict.PassVerdictOnly, OK: true,
			Switch: verdict.Switch{Result: verdict.SwitchBoot}}, exitcode.OK)
		tflog.Info(ctx, node+": verdict: not judged (--mode boot): the node runs its new generation after its next boot")
		return
	}
	cfg.VerdictOnly = true
	t, err := transports.Open(s.incusSpec(m.IncusInstance.ValueString(), m.IncusProject.ValueString()))
	if err != nil {
		refuse(fmt.Errorf("wait: %w", err))
		return
	}
	defer t.Close()
	res := (&effects.Deploy{Node: node, Transport: t, Config: cfg, Reporter: logReporter{ctx}}).Run(ctx)
	record(res.Verdict, res.ExitCode)
	if res.ExitCode != exitcode.OK {
		fail(verdictFailure(node, res))
	}
}
