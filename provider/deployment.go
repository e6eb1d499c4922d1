package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/localcmd"
	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/receipt"
	"github.com/switchyard-nix/switchyard/transports"
	"github.com/switchyard-nix/switchyard/transports/ssh"
	"github.com/switchyard-nix/switchyard/verdict"
)

// deploymentModel is switchyard_deployment's data.
type deploymentModel struct {
	ID             types.String `tfsdk:"id"`
	Node           types.String `tfsdk:"node"`
	NixosConf      types.String `tfsdk:"nixos_conf"`
	Drv            types.String `tfsdk:"drv"`
	Host           types.String `tfsdk:"host"`
	Port           types.Int64  `tfsdk:"port"`
	User           types.String `tfsdk:"user"`
	HostKey        types.String `tfsdk:"host_key"`
	KnownHostsFile types.String `tfsdk:"known_hosts_file"`
	IncusInstance  types.String `tfsdk:"incus_instance"`
	IncusProject   types.String `tfsdk:"incus_project"`
	DeferVerdict   types.Bool   `tfsdk:"defer_verdict"`

	Toplevel types.String `tfsdk:"toplevel"`
	Previous types.String `tfsdk:"previous"`
	Verdict  types.String `tfsdk:"verdict"`
	Held     types.String `tfsdk:"held"`
	Drift    types.String `tfsdk:"drift"`
	OK       types.Bool   `tfsdk:"ok"`
	ExitCode types.Int64  `tfsdk:"exit_code"`
	Receipt  types.String `tfsdk:"receipt"`
}

type deployment struct{ configured }

func newDeployment() resource.Resource { return &deployment{} }

var (
	_ resource.Resource                   = (*deployment)(nil)
	_ resource.ResourceWithModifyPlan     = (*deployment)(nil)
	_ resource.ResourceWithValidateConfig = (*deployment)(nil)
)

func (d *deployment) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_deployment"
}

func (d *deployment) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "One node deployed by the switchyard deploy body, over SSH (host) or through the local Incus daemon " +
			"(incus_instance). Delete forgets the node; it never touches it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "the node's name",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"node": schema.StringAttribute{Required: true, Description: "the node's name",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"nixos_conf": schema.StringAttribute{Required: true, Description: "the node's configuration identity (SPEC 6.4): a change redeploys the node"},
			"drv":        schema.StringAttribute{Required: true, Description: "the derivation of the node's toplevel"},
			"host":       schema.StringAttribute{Optional: true, Description: "SSH host; exactly one of host and incus_instance is set"},
			"port":       schema.Int64Attribute{Optional: true, Description: "SSH port (default 22)"},
			"user":       schema.StringAttribute{Optional: true, Description: "SSH user (default root)"},
			"host_key":   schema.StringAttribute{Optional: true, Description: "the node's pinned host key"},
			"known_hosts_file": schema.StringAttribute{Optional: true,
				Description: "known_hosts file checked when no host key is pinned"},
			"incus_instance": schema.StringAttribute{Optional: true,
				Description: "the Incus instance of the local daemon the node is deployed to, instead of SSH; exactly one of host and incus_instance is set"},
			"incus_project": schema.StringAttribute{Optional: true,
				Description: "the Incus project of incus_instance (default \"default\")"},
			"defer_verdict": schema.BoolAttribute{Optional: true,
				Description: "the node's verdict is a switchyard_verdict pass after this deploy (tf-incus-operator: after the " +
					"node's identity exists): units this pass finds failed do not fail the deploy; a switch that did not " +
					"install the toplevel still does"},
			"toplevel": computed("the toplevel the node was deployed with"),
			"previous": computed("the generation the node ran before"),
			"verdict":  computed("the verdict of the last deploy (JSON)"),
			"held": computed("why a staged rollout held the node in the last apply (\"held: the rollout stopped at " +
				"batch 2 (web4 failed)\"): it was not deployed; \"\" when it was"),
			"drift": computed("how the node departs from toplevel, as the last refresh read it (\"runs /nix/store/..., " +
				"its system profile is ..., not /nix/store/...\"): someone rolled it back or switched it by hand, and the " +
				"next apply deploys toplevel again; \"\" when it runs toplevel"),
			"ok":        schema.BoolAttribute{Computed: true, Description: "whether the last deploy's verdict passed"},
			"exit_code": schema.Int64Attribute{Computed: true, Description: "the last deploy's exit code (SPEC 2.1)"},
			"receipt": computed("the last deploy's receipt (SPEC 6.8): an in-toto statement in a DSSE envelope (JSON), " +
				"also kept on the node under " + receipt.NodeDir + "; \"\" when none was made"),
		},
	}
}

// ValidateConfig refuses a node with both or neither of host and incus_instance;
// one that is not known yet is checked at apply.
func (d *deployment) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var host, inst types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("host"), &host)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("incus_instance"), &inst)...)
	if resp.Diagnostics.HasError() || host.IsUnknown() || inst.IsUnknown() {
		return
	}
	if msg := transportChoice(host, inst); msg != "" {
		var node types.String
		_ = req.Config.GetAttribute(ctx, path.Root("node"), &node)
		if !node.IsNull() && !node.IsUnknown() {
			msg = node.ValueString() + ": " + msg
		}
		resp.Diagnostics.AddAttributeError(path.Root("host"), "switchyard_deployment: host or incus_instance", msg)
	}
}

// transportChoice says what is wrong with the choice of a transport, "" when
// exactly one of host and incus_instance is set.
func transportChoice(host, inst types.String) string {
	hasHost := !host.IsNull() && host.ValueString() != ""
	hasInst := !inst.IsNull() && inst.ValueString() != ""
	switch {
	case hasHost && hasInst:
		return "both host and incus_instance are set: set exactly one (host deploys over SSH, incus_instance through the local Incus daemon)"
	case !hasHost && !hasInst:
		return "neither host nor incus_instance is set: set exactly one (host deploys over SSH, incus_instance through the local Incus daemon)"
	}
	return ""
}

// ModifyPlan makes a node whose last verdict failed, that drifted from its toplevel
// (Read), or that apply --reboot must reboot (dueForReboot), change again: its computed
// attributes become unknown, so the apply deploys it even when its inputs are the same.
func (d *deployment) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	computed := []string{"toplevel", "previous", "verdict", "held", "drift", "receipt"}
	retryFailed(ctx, req, resp, computed...)
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var drift types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("drift"), &drift)...)
	if resp.Diagnostics.HasError() || drift.ValueString() == "" && !d.dueForReboot(ctx, req, &resp.Diagnostics) {
		return
	}
	for _, a := range computed {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(a), types.StringUnknown())...)
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("ok"), types.BoolUnknown())...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("exit_code"), types.Int64Unknown())...)
}

// dueForReboot reads, under apply --reboot, whether the node's last deploy left its
// toplevel for the next boot (bootPending) while the node still runs another
// generation: only a deploy reboots it, so it is deployed again. A node that cannot be
// read is deployed again too (the deploy says what it finds), with a warning. The
// provider's session is configured here: OpenTofu configures the provider before it
// plans, and apply plans in the same run.
func (d *deployment) dueForReboot(ctx context.Context, req resource.ModifyPlanRequest, diags *diag.Diagnostics) bool {
	s := d.s
	if s == nil || s.deployErr != nil || !s.deploy.Reboot {
		return false
	}
	var m deploymentModel
	if diags.Append(req.State.Get(ctx, &m)...); diags.HasError() {
		return false
	}
	var v verdict.Verdict
	if json.Unmarshal([]byte(m.Verdict.ValueString()), &v) != nil || !bootPending(v.Switch.Result) {
		return false
	}
	node := m.Node.ValueString()
	obs, err := m.observe(ctx, s)
	running := obs.Running
	if err != nil {
		diags.AddWarning(node+": reboot: the node could not be read",
			fmt.Sprintf("%s: %v; its last deploy left %s for its next boot: deployed again so that it reboots", node, err, m.Toplevel.ValueString()))
	}
	due := rebootDue(v.Switch.Result, m.Toplevel.ValueString(), running)
	if due {
		tflog.Info(ctx, fmt.Sprintf("%s: reboot: its last deploy (%s) left %s for its next boot and it runs %s: deployed again to reboot it",
			node, v.Switch.Result, m.Toplevel.ValueString(), running))
	}
	return due
}

// rebootDue: a node whose recorded switch result left toplevel for the next boot, and
// that runs something else ("": not read), must be deployed again to be rebooted.
func rebootDue(recorded verdict.SwitchResult, toplevel, running string) bool {
	return bootPending(recorded) && running != toplevel
}

// bootPending: the deploy pointed the profile and boot entry at the toplevel for the
// next boot, and the node went on running its previous generation: --mode boot, or a
// switch that needed a reboot (switch-to-configuration exit 100).
func bootPending(r verdict.SwitchResult) bool {
	return r == verdict.SwitchBoot || r == verdict.SwitchRebootNeeded
}

// observe reads what the node runs, its system profile and its boot entry, within
// readTimeout: an unreachable node must not hold a plan for the transport's whole wait.
func (m *deploymentModel) observe(ctx context.Context, s *session) (effects.Observed, error) {
	t, err := m.transport(s)
	if err != nil {
		return effects.Observed{}, err
	}
	defer t.Close()
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	return effects.Observe(rctx, t)
}

// retryFailed makes a resource whose recorded verdict failed change again: its
// verdict's computed attributes (the strings named, ok and exit_code) become unknown,
// so the next apply runs it again even when its inputs are the same.
func retryFailed(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, strs ...string) {
	if req.State.Raw.IsNull() || req.Plan.Raw.IsNull() {
		return
	}
	var ok types.Bool
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("ok"), &ok)...)
	if resp.Diagnostics.HasError() || ok.IsNull() || ok.ValueBool() {
		return
	}
	for _, a := range strs {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root(a), types.StringUnknown())...)
	}
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("ok"), types.BoolUnknown())...)
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("exit_code"), types.Int64Unknown())...)
}

func (d *deployment) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m deploymentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	d.deploy(ctx, &m, nil, &resp.Diagnostics)
	// The state is returned even with an error: OpenTofu keeps it (tainted), so the
	// failed verdict is recorded and the next apply retries the node.
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (d *deployment) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m deploymentModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var prior deploymentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	d.deploy(ctx, &m, &prior, &resp.Diagnostics)
	// A retry on a node already running the toplevel (a failed verdict deployed
	// again) says the node ran that toplevel before: keep the generation that came
	// before it, the one to roll back to.
	if m.Previous.Equal(m.Toplevel) && prior.Toplevel.Equal(m.Toplevel) {
		m.Previous = prior.Previous
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// readTimeout bounds a refresh's read of one node (observe).
const readTimeout = 30 * time.Second

// Read reads what the node runs, its system profile and its boot entry (issue 15
// item 4), and records in drift how they depart from the toplevel the last deploy
// installed: a node rolled back or switched by hand shows in plan, and the next
// apply deploys its planned generation again (ModifyPlan). A node that cannot be
// read keeps its state as recorded, with a warning naming it: it is never dropped
// from the state. A node never deployed (held before its first deploy) is not read.
func (d *deployment) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m deploymentModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || m.Toplevel.ValueString() == "" {
		return
	}
	s := d.session(&resp.Diagnostics)
	if s == nil {
		return
	}
	node := m.Node.ValueString()
	keep := func(err error) {
		resp.Diagnostics.AddWarning(node+": refresh: the node could not be read",
			fmt.Sprintf("%s: %v; its state is kept as the last deploy recorded it", node, err))
	}
	obs, err := m.observe(ctx, s)
	if err != nil {
		keep(err)
		return
	}
	var v verdict.Verdict
	_ = json.Unmarshal([]byte(m.Verdict.ValueString()), &v)
	// A deploy that left the toplevel for the next boot: the node running its previous
	// generation is no drift, only its profile or boot entry elsewhere is.
	m.Drift = types.StringValue(obs.Drift(m.Toplevel.ValueString(), bootPending(v.Switch.Result)))
	if d := m.Drift.ValueString(); d != "" {
		tflog.Warn(ctx, node+": drift: "+d)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete forgets the node: it never touches it.
func (d *deployment) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// deploy runs the deploy body on the node and fills the computed attributes; a
// failed verdict is reported in diags, naming the node. prior is the node's state
// before (nil for a create). In a staged rollout (the run's contract.Run.Rollout) a node whose stage
// before it did not pass is held: not contacted, its state recording why; and a
// failed verdict is a warning, not an error, so that OpenTofu goes on to the stages
// after it, which it would otherwise skip without recording them as held.
func (d *deployment) deploy(ctx context.Context, m *deploymentModel, prior *deploymentModel, diags *diag.Diagnostics) {
	s := d.session(diags)
	if s == nil {
		return
	}
	node := m.Node.ValueString()
	m.ID = types.StringValue(node)
	m.Held, m.Drift = types.StringValue(""), types.StringValue("")
	m.Receipt = types.StringValue("")
	if prior != nil && !prior.Receipt.IsNull() && !prior.Receipt.IsUnknown() {
		m.Receipt = prior.Receipt // a node not deployed now keeps its last receipt
	}
	record := func(v verdict.Verdict, code int) {
		b, _ := json.Marshal(v)
		m.Toplevel = types.StringValue(v.Toplevel)
		m.Previous = types.StringValue(v.Previous)
		m.Verdict = types.StringValue(string(b))
		m.OK = types.BoolValue(code == exitcode.OK)
		m.ExitCode = types.Int64Value(int64(code))
	}
	step, staged := s.run.Rollout[node]
	fail := diags.AddError
	if staged {
		fail = diags.AddWarning
		if reason := heldBy(step, &s.outcomes); reason != "" {
			d.hold(ctx, m, prior, reason)
			s.outcomes.Store(node, outcome{held: reason})
			diags.AddWarning(node+": held", node+": "+reason)
			return
		}
	}
	cfg, err := s.deploy, s.deployErr
	if err != nil {
		record(verdict.Verdict{Node: node, ExitCode: exitcode.Refused, Reasons: []string{err.Error()}}, exitcode.Refused)
		diags.AddError(node+": deploy refused", fmt.Sprintf("%s: %v", node, err))
		return
	}
	if cfg.VerdictOnly {
		// The verdict-only pass changes nothing, so it cannot stand for a create or an
		// update: the state would record this configuration as deployed. switchyard
		// runs it without OpenTofu (the verdict verb, or apply with the variable).
		err := errors.New("DEPLOY_VERDICT_ONLY=1: the provider deploys, it does not run the verdict-only pass: " +
			"run `switchyard <method> verdict` (or apply) instead")
		record(verdict.Verdict{Node: node, ExitCode: exitcode.Refused, Reasons: []string{err.Error()}}, exitcode.Refused)
		diags.AddError(node+": deploy refused", fmt.Sprintf("%s: %v", node, err))
		return
	}
	t, err := m.transport(s)
	if err != nil {
		record(verdict.Verdict{Node: node, ExitCode: exitcode.Refused, Reasons: []string{"wait: " + err.Error()}}, exitcode.Refused)
		s.outcomes.Store(node, outcome{})
		fail(node+": deploy refused", fmt.Sprintf("%s: wait: %v", node, err))
		return
	}
	defer t.Close()
	rec := receipt.NewRecorder(logReporter{ctx})
	res := (&effects.Deploy{Node: node, Transport: t, Config: cfg, Reporter: rec,
		Source: effects.Source{Drv: m.Drv.ValueString()}, SkipUnchanged: true, Journal: s.journal()}).Run(ctx)
	record(res.Verdict, res.ExitCode)
	if res.Journal != "" {
		// The provider's log is not the operator's: what a rerun found of a killed
		// apply is shown as a warning, like a held node.
		diags.AddWarning(node+": rerun after a killed deploy", node+": "+res.Journal)
	}
	keepReceipt(ctx, s.run, m, t, res, rec.Phases(node))
	if m.DeferVerdict.ValueBool() && deferrable(res) {
		// The units are judged again by the pass after registration (switchyard_verdict),
		// whose verdict is the node's: this one only had to install the toplevel.
		m.OK = types.BoolValue(true)
		tflog.Info(ctx, fmt.Sprintf("%s: the units' verdict (exit %d) waits for the pass after registration", node, res.ExitCode))
	}
	s.outcomes.Store(node, outcome{ok: m.OK.ValueBool()})
	if !m.OK.ValueBool() {
		fail(verdictFailure(node, res))
	}
}

// hold records a node a staged rollout did not reach: the generation it runs stays
// the one its state recorded (prior; none for a node never deployed), and its
// verdict is held (exit 1), with the toplevel it would have been deployed with.
func (d *deployment) hold(ctx context.Context, m, prior *deploymentModel, reason string) {
	node := m.Node.ValueString()
	v := verdict.Verdict{Node: node, Pass: verdict.PassDeploy, Switch: verdict.Switch{Result: verdict.SwitchHeld},
		ExitCode: exitcode.Verdict, Reasons: []string{reason}}
	if out, err := localcmd.Output(ctx, nil, "nix-store", "--query", "--outputs", "--", m.Drv.ValueString()); err == nil {
		v.Toplevel = strings.TrimSpace(string(out))
	}
	m.Toplevel, m.Previous = types.StringValue(""), types.StringValue("")
	if prior != nil {
		m.Toplevel, m.Previous = prior.Toplevel, prior.Previous
		v.Previous = prior.Toplevel.ValueString()
	}
	b, _ := json.Marshal(v)
	m.Verdict = types.StringValue(string(b))
	m.Held = types.StringValue(reason)
	m.OK = types.BoolValue(false)
	m.ExitCode = types.Int64Value(exitcode.Verdict)
	tflog.Info(ctx, node+": "+reason)
}

// verdictFailure is the diagnostic of a failed pass: its summary, and its detail
// naming the node and why: the verdict's reasons and what failed after the report
// (finalize), which the operator of a tf method sees only here.
func verdictFailure(node string, res effects.Result) (summary, detail string) {
	why := strings.Join(append(slices.Clip(res.Verdict.Reasons), res.Late...), "; ")
	if why == "" {
		why = fmt.Sprintf("exit %d", res.ExitCode)
	}
	return fmt.Sprintf("%s: verdict failed (exit %d)", node, res.ExitCode), fmt.Sprintf("%s: %s", node, why)
}

// deferrable tells whether a deploy's failure is the units' alone, which a later
// verdict-only pass judges again: exit 1 with the toplevel switched to (or already
// running, or booted by apply --reboot). A switch that failed, was never confirmed or
// needs a reboot, and every exit 2 or 3, are the deploy's own failures.
func deferrable(res effects.Result) bool {
	if res.ExitCode != exitcode.Verdict || len(res.Late) > 0 {
		// Late: what failed after the report is the deploy's own (apply --reboot: the
		// node came back on another generation).
		return false
	}
	switch res.Verdict.Switch.Result {
	case verdict.SwitchOK, verdict.SwitchUnitsFailed, verdict.SwitchUnchanged:
		return true
	case verdict.SwitchSkipped:
		// apply --reboot: the verdict-only pass of the booted toplevel.
		return res.Verdict.Pass == verdict.PassVerdictOnly
	}
	return false
}

// transport is the node's transport: SSH to host with the run's key, or
// incus_instance through the run's Incus remote (the local daemon by default).
func (m *deploymentModel) transport(s *session) (effects.Transport, error) {
	if msg := transportChoice(m.Host, m.IncusInstance); msg != "" {
		return nil, errors.New(msg)
	}
	noSubstitute := slices.Contains(s.run.NoSubstitute, m.Node.ValueString())
	if inst := m.IncusInstance.ValueString(); inst != "" {
		spec := s.incusSpec(inst, m.IncusProject.ValueString())
		spec.Incus.NoSubstitute = noSubstitute
		return transports.Open(spec)
	}
	spec := transports.Spec{Kind: transports.SSH, SSH: ssh.Config{User: m.User.ValueString(), Host: m.Host.ValueString(),
		Port: int(m.Port.ValueInt64()), HostKey: m.HostKey.ValueString(), KnownHostsFile: m.KnownHostsFile.ValueString(),
		NoSubstitute: noSubstitute}}
	if key := s.run.SSHKeyFile; key != "" {
		spec.SSH.KeyFiles = []string{key}
	}
	return transports.Open(spec)
}

// logReporter sends the body's progress to the provider log (TF_LOG_PROVIDER), and
// its log lines to the CLI too (bodyLogs), which reports them as the ssh method does.
type logReporter struct{ ctx context.Context }

func (r logReporter) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
	tflog.Debug(r.ctx, fmt.Sprintf("%s: %s %v (%s)", node, phase, state, elapsed.Round(time.Millisecond)))
}

func (r logReporter) Log(node, level, msg string) {
	bodyLogs.Load().send(contract.LogLine{Node: node, Level: level, Msg: msg})
	switch level {
	case "error", "warn":
		tflog.Warn(r.ctx, msg)
	default:
		tflog.Info(r.ctx, msg)
	}
}

func (r logReporter) Verdict(v verdict.Verdict) {
	b, _ := json.Marshal(v)
	tflog.Info(r.ctx, v.Node+": verdict "+string(b))
}

// keepReceipt makes the receipt of a deploy that reached and judged the node, when
// the run asked for receipts (its provenance), and keeps it in the state and on the
// node. One that cannot be made or kept is a warning.
func keepReceipt(ctx context.Context, run contract.Run, m *deploymentModel, t effects.Transport, res effects.Result, phases []receipt.Phase) {
	if len(run.ReceiptProvenance) == 0 || !receipt.Judged(res.Verdict) {
		return
	}
	node := m.Node.ValueString()
	warn := func(err error) { tflog.Warn(ctx, fmt.Sprintf("%s: receipt: %v", node, err)) }
	var prov receipt.Provenance
	if err := json.Unmarshal(run.ReceiptProvenance, &prov); err != nil {
		warn(err)
		return
	}
	var key *receipt.Key
	if file := run.ReceiptKey; file != "" {
		k, err := receipt.LoadKey(file)
		if err != nil {
			warn(fmt.Errorf("the receipt key: %w", err))
			return
		}
		key = k
	}
	env, name, err := receipt.Make(ctx, prov, node, m.NixosConf.ValueString(), m.Drv.ValueString(), res.Verdict, phases, key)
	if err != nil {
		warn(err)
		return
	}
	m.Receipt = types.StringValue(string(env))
	dctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	if err := receipt.Deliver(dctx, t, res.Verdict.Toplevel, name, env); err != nil {
		warn(fmt.Errorf("on the node: %w", err))
	}
}
