package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/switchyard-nix/switchyard/transports/incus"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// instanceModel is switchyard_incus_instance's data. The attribute names follow
// the public Incus provider's incus_instance.
type instanceModel struct {
	ID       types.String `tfsdk:"id"`
	Name     types.String `tfsdk:"name"`
	Project  types.String `tfsdk:"project"`
	Image    types.String `tfsdk:"image"`
	Type     types.String `tfsdk:"type"`
	Profiles types.List   `tfsdk:"profiles"`
	Config   types.Map    `tfsdk:"config"`
	Devices  types.Map    `tfsdk:"devices"`
	Status   types.String `tfsdk:"status"`
	UUID     types.String `tfsdk:"uuid"`
}

// bootTimeout bounds the wait for systemd to finish booting a new instance.
const bootTimeout = 2 * time.Minute

// instance is the switchyard_incus_instance resource: an Incus instance of the
// local daemon (its unix socket; $INCUS_DIR is honoured), created from a local
// image, started and booted. Delete stops and deletes it.
type instance struct {
	s   *session
	c   *api.Client
	err error // the remote could not be opened
}

func newInstance() resource.Resource { return &instance{} }

// Configure reaches the run's Incus remote (the local daemon by default); a remote
// that cannot be used fails every operation, naming it.
func (r *instance) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.s, r.c, r.err = incusOf(req.ProviderData, &resp.Diagnostics)
}

// usable reports a remote that could not be opened.
func (r *instance) usable(diags *diag.Diagnostics) bool { return usableIncus(r.c, r.err, diags) }

var _ resource.Resource = (*instance)(nil)

func (r *instance) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_incus_instance"
}

var deviceType = types.MapType{ElemType: types.StringType}

func (r *instance) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		Description: "An Incus instance of the local daemon, created from a local image, started, and ready once systemd in it " +
			"has finished booting. Kept close to the public Incus provider's incus_instance. Delete stops and deletes it.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, Description: "the instance's name", PlanModifiers: replace},
			"project": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(api.DefaultProject),
				Description: "the instance's Incus project (default \"default\")", PlanModifiers: replace},
			"image": schema.StringAttribute{Required: true, PlanModifiers: replace,
				Description: "a local image of the daemon: an alias or a fingerprint"},
			"type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(api.TypeContainer),
				PlanModifiers: replace, Validators: []validator.String{instanceType{}},
				Description: "the instance's type: \"container\" (default) or \"virtual-machine\""},
			"profiles": schema.ListAttribute{Optional: true, Computed: true, ElementType: types.StringType,
				Default:     listdefault.StaticValue(types.ListValueMust(types.StringType, []attr.Value{types.StringValue("default")})),
				Description: "the instance's profiles, in order (default [\"default\"])"},
			"config": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "the instance's configuration keys (the daemon's own volatile.* and image.* keys are not shown)"},
			"devices": schema.MapAttribute{Optional: true, ElementType: deviceType,
				Description: "the instance's own devices: device name to its properties (\"type\" among them)"},
			"id": schema.StringAttribute{Computed: true, Description: "<project>/<name>",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"status": schema.StringAttribute{Computed: true, Description: "the instance's status (Running, Stopped, ...)"},
			// What changes only when the instance is made anew (its replacement), unlike
			// the resource as a whole, which an in-place update (limits) changes too:
			// the trigger of what a new instance lacks (its agent's token, its deploy).
			"uuid": schema.StringAttribute{Computed: true, Description: "the instance's volatile.uuid: new with each new instance",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

// label names the instance in errors.
func (m *instanceModel) label() string {
	return "incus instance " + m.Project.ValueString() + "/" + m.Name.ValueString()
}

func (r *instance) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m instanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	project, name := m.Project.ValueString(), m.Name.ValueString()
	fail := func(what string, err error) {
		resp.Diagnostics.AddError(m.label()+": "+what, fmt.Sprintf("%s: %s: %v", m.label(), what, err))
	}
	put, diags := m.put(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	src, err := r.source(ctx, project, m.Image.ValueString())
	if err != nil {
		fail("image "+m.Image.ValueString(), err)
		return
	}
	post := api.InstancesPost{Name: name, Source: src, InstancePut: put, Type: m.Type.ValueString()}
	if err := r.c.CreateInstance(ctx, project, post); err != nil {
		fail("create", err)
		return
	}
	// The instance exists from here on: it is kept in state even when what
	// follows fails, so OpenTofu marks it tainted and replaces (deletes) it later.
	m.ID = types.StringValue(project + "/" + name)
	m.Status = types.StringValue(api.StatusStopped)
	m.UUID = types.StringValue("")
	defer func() { resp.Diagnostics.Append(resp.State.Set(ctx, &m)...) }()
	if err := r.c.SetState(ctx, project, name, "start", false); err != nil {
		fail("start", err)
		return
	}
	if err := r.waitBooted(ctx, project, name); err != nil {
		fail("boot", err)
	}
	inst, err := r.c.Instance(ctx, project, name)
	if err != nil {
		fail("read", err)
		return
	}
	m.Status = types.StringValue(inst.Status)
	m.UUID = types.StringValue(inst.Config["volatile.uuid"])
	if inst.Status != api.StatusRunning && !resp.Diagnostics.HasError() {
		fail("start", fmt.Errorf("status %s after the start", inst.Status))
	}
}

// source is where a new instance comes from: the local image alias img when
// there is one, else the image of fingerprint img. A project with images of
// its own (features.images true) that has neither gets the default project's
// image of that alias or fingerprint cached in it first: the daemon does not
// look into other projects for a local image.
func (r *instance) source(ctx context.Context, project, img string) (api.InstanceSource, error) {
	if img == "" {
		return api.InstanceSource{}, errors.New("no image")
	}
	fp, err := r.localImage(ctx, project, img)
	switch {
	case err == nil && fp == "":
		return api.InstanceSource{Type: "image", Alias: img}, nil
	case err == nil:
		return api.InstanceSource{Type: "image", Fingerprint: fp}, nil
	case !api.IsNotFound(err):
		return api.InstanceSource{}, err
	}
	notFound := fmt.Errorf("no local image has the alias or fingerprint %q", img)
	if project == "" || project == api.DefaultProject {
		return api.InstanceSource{}, notFound
	}
	p, err := r.c.Project(ctx, project)
	if err != nil {
		return api.InstanceSource{}, fmt.Errorf("project %s: %w", project, err)
	}
	if p.Config["features.images"] != "true" {
		return api.InstanceSource{}, notFound // it sees the default project's images already
	}
	fp, err = r.localImage(ctx, api.DefaultProject, img)
	switch {
	case api.IsNotFound(err):
		return api.InstanceSource{}, fmt.Errorf("no local image of project %s or %s has the alias or fingerprint %q", project, api.DefaultProject, img)
	case err != nil:
		return api.InstanceSource{}, err
	case fp == "":
		a, err := r.c.ImageAlias(ctx, api.DefaultProject, img)
		if err != nil {
			return api.InstanceSource{}, err
		}
		fp = a.Target
	}
	if err := r.cacheImage(ctx, project, fp); err != nil {
		return api.InstanceSource{}, fmt.Errorf("caching image %s of project %s in project %s: %w", shortFingerprint(fp), api.DefaultProject, project, err)
	}
	tflog.Info(ctx, fmt.Sprintf("incus project %s: cached image %s of project %s", project, shortFingerprint(fp), api.DefaultProject))
	return api.InstanceSource{Type: "image", Fingerprint: fp}, nil
}

// localImage finds img in project: "" when it is an alias, else the full
// fingerprint of the image it is a fingerprint (prefix) of. Neither is an
// error IsNotFound tells.
func (r *instance) localImage(ctx context.Context, project, img string) (string, error) {
	_, err := r.c.ImageAlias(ctx, project, img)
	if err == nil || !api.IsNotFound(err) {
		return "", err
	}
	image, err := r.c.Image(ctx, project, img)
	if err != nil {
		return "", err
	}
	return image.Fingerprint, nil
}

// cacheImage copies the default project's image of fingerprint fp into
// project, unless it is there already (another process may have copied it).
func (r *instance) cacheImage(ctx context.Context, project, fp string) error {
	r.s.cacheMu.Lock()
	defer r.s.cacheMu.Unlock()
	if _, err := r.c.Image(ctx, project, fp); err == nil {
		return nil
	}
	err := r.c.CopyImage(ctx, api.DefaultProject, project, fp)
	if err != nil {
		if _, gerr := r.c.Image(ctx, project, fp); gerr == nil {
			return nil // copied meanwhile by someone else
		}
		return err
	}
	return r.c.SetImageProperties(ctx, project, fp, map[string]string{cachedProperty: "true"})
}

// cachedProperty marks an image switchyard cached in a project (cacheImage), the
// only images the project's delete removes: the others are the tenant's.
const cachedProperty = "switchyard.cached"

// waitBooted waits, at most bootTimeout, until systemd in the instance has
// finished booting ("running" or "degraded"). Right after the start the system
// bus may not exist yet and `systemctl is-system-running --wait` fails at once:
// it is then asked again. An instance without systemctl has nothing to wait for.
func (r *instance) waitBooted(ctx context.Context, project, name string) error {
	ctx, cancel := context.WithTimeout(ctx, bootTimeout)
	defer cancel()
	req := api.ExecRequest{Command: []string{"systemctl", "is-system-running", "--wait"},
		Environment: map[string]string{"PATH": incus.BasePath}}
	var state string
	var lastErr error
	for {
		var out, errOut bytes.Buffer
		_, err := r.c.Exec(ctx, name, project, req, nil, &out, &errOut)
		state = strings.TrimSpace(out.String())
		var a *api.Error
		switch {
		case err == nil && (state == "running" || state == "degraded"):
			tflog.Debug(ctx, fmt.Sprintf("incus instance %s/%s: booted (%s)", project, name, state))
			return nil
		case errors.As(err, &a) && api.IsCommandNotFound(a.Msg):
			tflog.Warn(ctx, fmt.Sprintf("incus instance %s/%s: no systemctl, the boot is not waited for", project, name))
			return nil
		case err == nil:
			lastErr = nil
			if s := strings.TrimSpace(errOut.String()); s != "" {
				lastErr = errors.New(s)
			}
		case ctx.Err() == nil:
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if state == "" {
				state = "unknown"
			}
			msg := fmt.Sprintf("systemd did not finish booting within %s (state %s)", bootTimeout, state)
			if lastErr != nil {
				msg += ": " + lastErr.Error()
			}
			return errors.New(msg)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (r *instance) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m instanceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	inst, err := r.c.Instance(ctx, m.Project.ValueString(), m.Name.ValueString())
	if api.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError(m.label()+": read", fmt.Sprintf("%s: read: %v", m.label(), err))
		return
	}
	resp.Diagnostics.Append(m.fill(ctx, inst)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// fill sets the model from what the daemon tells of the instance. config and
// devices stay null when they were null and the instance has none of its own.
func (m *instanceModel) fill(ctx context.Context, inst *api.Instance) diag.Diagnostics {
	var diags, d diag.Diagnostics
	m.ID = types.StringValue(m.Project.ValueString() + "/" + m.Name.ValueString())
	m.Status = types.StringValue(inst.Status)
	m.UUID = types.StringValue(inst.Config["volatile.uuid"])
	if inst.Type != "" {
		m.Type = types.StringValue(inst.Type)
	}
	profiles := inst.Profiles
	if profiles == nil {
		profiles = []string{}
	}
	m.Profiles, d = types.ListValueFrom(ctx, types.StringType, profiles)
	diags.Append(d...)
	config := userConfig(inst.Config)
	if len(config) > 0 || !m.Config.IsNull() {
		m.Config, d = types.MapValueFrom(ctx, types.StringType, config)
		diags.Append(d...)
	}
	devices := inst.Devices
	if devices == nil {
		devices = map[string]map[string]string{}
	}
	if len(devices) > 0 || !m.Devices.IsNull() {
		m.Devices, d = types.MapValueFrom(ctx, deviceType, devices)
		diags.Append(d...)
	}
	return diags
}

// daemonKey tells whether a config key is one the daemon sets itself.
func daemonKey(k string) bool {
	return strings.HasPrefix(k, "volatile.") || strings.HasPrefix(k, "image.")
}

// userConfig is config without the daemon's own keys.
func userConfig(config map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range config {
		if !daemonKey(k) {
			out[k] = v
		}
	}
	return out
}

// put is the profiles, config and devices of the model.
func (m *instanceModel) put(ctx context.Context) (api.InstancePut, diag.Diagnostics) {
	var diags diag.Diagnostics
	put := api.InstancePut{Profiles: []string{}, Config: map[string]string{}, Devices: map[string]map[string]string{}}
	if !m.Profiles.IsNull() && !m.Profiles.IsUnknown() {
		diags.Append(m.Profiles.ElementsAs(ctx, &put.Profiles, false)...)
	}
	if !m.Config.IsNull() && !m.Config.IsUnknown() {
		diags.Append(m.Config.ElementsAs(ctx, &put.Config, false)...)
	}
	if !m.Devices.IsNull() && !m.Devices.IsUnknown() {
		diags.Append(m.Devices.ElementsAs(ctx, &put.Devices, false)...)
	}
	return put, diags
}

// Update changes the profiles, config and devices in place. Config keys and
// devices that were in the state and are no longer planned are removed; the
// daemon's own keys are kept.
func (r *instance) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m, prior instanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	want, diags := m.put(ctx)
	resp.Diagnostics.Append(diags...)
	had, diags := prior.put(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	project, name := m.Project.ValueString(), m.Name.ValueString()
	err := r.c.UpdateInstance(ctx, project, name, func(p *api.InstancePut) {
		p.Profiles = want.Profiles
		for k := range had.Config {
			if _, ok := want.Config[k]; !ok && !daemonKey(k) {
				delete(p.Config, k)
			}
		}
		for k, v := range want.Config {
			p.Config[k] = v
		}
		for k := range had.Devices {
			if _, ok := want.Devices[k]; !ok {
				delete(p.Devices, k)
			}
		}
		for k, v := range want.Devices {
			p.Devices[k] = v
		}
	})
	if err != nil {
		resp.Diagnostics.AddError(m.label()+": update", fmt.Sprintf("%s: update: %v", m.label(), err))
		return
	}
	m.ID = types.StringValue(project + "/" + name)
	m.Status, m.UUID = prior.Status, prior.UUID
	if inst, err := r.c.Instance(ctx, project, name); err == nil {
		m.Status = types.StringValue(inst.Status)
		m.UUID = types.StringValue(inst.Config["volatile.uuid"])
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete stops the instance (forced) and deletes it; an instance already gone
// is deleted.
func (r *instance) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m instanceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	project, name := m.Project.ValueString(), m.Name.ValueString()
	fail := func(what string, err error) {
		resp.Diagnostics.AddError(m.label()+": "+what, fmt.Sprintf("%s: %s: %v", m.label(), what, err))
	}
	inst, err := r.c.Instance(ctx, project, name)
	if api.IsNotFound(err) {
		return
	}
	if err != nil {
		fail("read", err)
		return
	}
	if inst.Status != api.StatusStopped {
		err := r.c.SetState(ctx, project, name, "stop", true)
		if err != nil && !api.IsNotFound(err) {
			// It may have stopped on its own meanwhile: Incus refuses to stop a
			// stopped instance. The state says, not the refusal's words.
			if now, rerr := r.c.Instance(ctx, project, name); rerr != nil || now.Status != api.StatusStopped {
				fail("stop", err)
				return
			}
		}
	}
	if err := r.c.DeleteInstance(ctx, project, name); err != nil && !api.IsNotFound(err) {
		fail("delete", err)
	}
}

// instanceType accepts the instance types of the Incus API.
type instanceType struct{}

func (instanceType) Description(context.Context) string {
	return `one of "` + api.TypeContainer + `" or "` + api.TypeVM + `"`
}

func (v instanceType) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v instanceType) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if t := req.ConfigValue.ValueString(); t != api.TypeContainer && t != api.TypeVM {
		resp.Diagnostics.AddAttributeError(req.Path, "incus instance type",
			fmt.Sprintf("%q is not an instance type: want %s", t, v.Description(ctx)))
	}
}
