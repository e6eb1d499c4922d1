package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

// projectModel is switchyard_incus_project's data. The attribute names follow
// the public Incus provider's incus_project.
type projectModel struct {
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	Description types.String `tfsdk:"description"`
	Config      types.Map    `tfsdk:"config"`
}

// project is the switchyard_incus_project resource: an Incus project (a
// tenant's, for tf-incus-operator). Delete removes the images switchyard cached in
// it and then the project, and refuses while instances or images of others are in it.
type project struct {
	c   *api.Client
	err error // the remote could not be opened
}

func newProject() resource.Resource { return &project{} }

// Configure reaches the run's Incus remote (the local daemon by default).
func (r *project) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	_, r.c, r.err = incusOf(req.ProviderData, &resp.Diagnostics)
}

var _ resource.Resource = (*project)(nil)

func (r *project) usable(diags *diag.Diagnostics) bool { return usableIncus(r.c, r.err, diags) }

func (r *project) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_incus_project"
}

func (r *project) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "An Incus project. Kept close to the public Incus provider's incus_project. Delete removes the images " +
			"switchyard cached in it (when it has its own images) and then the project; it refuses while instances, or " +
			"images switchyard did not cache, are in it.",
		Attributes: map[string]schema.Attribute{
			"name": schema.StringAttribute{Required: true, Description: "the project's name",
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"description": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(""),
				Description: "the project's description"},
			"config": schema.MapAttribute{Optional: true, ElementType: types.StringType,
				Description: "the project's configuration keys (features.*, limits.*, restricted.*, ...); the features.* " +
					"defaults the daemon sets itself are not shown unless given here"},
			"id": schema.StringAttribute{Computed: true, Description: "the project's name",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (m *projectModel) label() string { return "incus project " + m.Name.ValueString() }

func (m *projectModel) config(ctx context.Context) (map[string]string, diag.Diagnostics) {
	out := map[string]string{}
	if m.Config.IsNull() || m.Config.IsUnknown() {
		return out, nil
	}
	diags := m.Config.ElementsAs(ctx, &out, false)
	return out, diags
}

func (r *project) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	config, diags := m.config(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	err := r.c.CreateProject(ctx, api.ProjectsPost{Name: name, Description: m.Description.ValueString(), Config: config})
	if err != nil {
		resp.Diagnostics.AddError(m.label()+": create", fmt.Sprintf("%s: create: %v", m.label(), err))
		return
	}
	m.ID = types.StringValue(name)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// defaultFeatures are the features.* keys the daemon sets to "true" on a new
// project that does not name them: Read does not show them unless the
// configuration has them, so they plan no change.
var defaultFeatures = map[string]bool{
	"features.images":          true,
	"features.profiles":        true,
	"features.storage.volumes": true,
	"features.storage.buckets": true,
}

// fill sets the model from the daemon's project: its description, and its
// config without the daemon's default features the model does not have.
// config stays null when it was null and nothing else is set.
func (m *projectModel) fill(ctx context.Context, p *api.Project) diag.Diagnostics {
	var diags diag.Diagnostics
	had, d := m.config(ctx)
	diags.Append(d...)
	config := map[string]string{}
	for k, v := range p.Config {
		if _, ok := had[k]; !ok && defaultFeatures[k] && v == "true" {
			continue
		}
		if strings.HasPrefix(k, "volatile.") {
			continue
		}
		config[k] = v
	}
	m.ID = types.StringValue(p.Name)
	m.Description = types.StringValue(p.Description)
	if len(config) > 0 || !m.Config.IsNull() {
		m.Config, d = types.MapValueFrom(ctx, types.StringType, config)
		diags.Append(d...)
	}
	return diags
}

func (r *project) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	p, err := r.c.Project(ctx, m.Name.ValueString())
	if api.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError(m.label()+": read", fmt.Sprintf("%s: read: %v", m.label(), err))
		return
	}
	resp.Diagnostics.Append(m.fill(ctx, p)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Update changes the description and config in place: keys that were in the
// state and are no longer planned are removed, the daemon's default features
// are kept.
func (r *project) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m, prior projectModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	want, diags := m.config(ctx)
	resp.Diagnostics.Append(diags...)
	had, diags := prior.config(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	err := r.c.UpdateProject(ctx, m.Name.ValueString(), func(p *api.ProjectPut) {
		p.Description = m.Description.ValueString()
		if p.Config == nil {
			p.Config = map[string]string{}
		}
		for k := range had {
			if _, ok := want[k]; !ok {
				delete(p.Config, k)
			}
		}
		for k, v := range want {
			p.Config[k] = v
		}
	})
	if err != nil {
		resp.Diagnostics.AddError(m.label()+": update", fmt.Sprintf("%s: update: %v", m.label(), err))
		return
	}
	m.ID = types.StringValue(m.Name.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// Delete deletes the images switchyard cached in the project (cachedProperty)
// when it has images of its own (features.images true; otherwise the images it
// shows are the default project's), then the project. A project that still holds
// instances is not touched, and one that holds images switchyard did not cache
// (the tenant's own uploads) is left with them: the error names them. A project
// already gone is deleted.
func (r *project) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var m projectModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	if !r.usable(&resp.Diagnostics) || resp.Diagnostics.HasError() {
		return
	}
	name := m.Name.ValueString()
	fail := func(what string, err error) {
		resp.Diagnostics.AddError(m.label()+": "+what, fmt.Sprintf("%s: %s: %v", m.label(), what, err))
	}
	p, err := r.c.Project(ctx, name)
	if api.IsNotFound(err) {
		return
	}
	if err != nil {
		fail("read", err)
		return
	}
	insts, err := r.c.Instances(ctx, name)
	if err != nil {
		fail("list instances", err)
		return
	}
	if len(insts) > 0 {
		names := make([]string, len(insts))
		for i, in := range insts {
			names[i] = in.Name
		}
		sort.Strings(names)
		fail("delete", fmt.Errorf("the project still holds %d instance(s): %s; delete them first", len(names), strings.Join(names, ", ")))
		return
	}
	if p.Config["features.images"] == "true" {
		images, err := r.c.Images(ctx, name)
		if err != nil {
			fail("list images", err)
			return
		}
		var theirs []string
		for _, img := range images {
			if img.Properties[cachedProperty] != "true" {
				theirs = append(theirs, imageLabel(img))
				continue
			}
			if err := r.c.DeleteImage(ctx, name, img.Fingerprint); err != nil && !api.IsNotFound(err) {
				fail("delete image "+shortFingerprint(img.Fingerprint), err)
				return
			}
		}
		if len(theirs) > 0 {
			sort.Strings(theirs)
			fail("delete", fmt.Errorf("the project still holds %d image(s) switchyard did not cache there: %s; delete them first",
				len(theirs), strings.Join(theirs, ", ")))
			return
		}
	}
	if err := r.c.DeleteProject(ctx, name); err != nil && !api.IsNotFound(err) {
		fail("delete", err)
	}
}

// imageLabel names an image: its short fingerprint and aliases.
func imageLabel(img api.Image) string {
	label := shortFingerprint(img.Fingerprint)
	for _, a := range img.Aliases {
		label += " " + a.Name
	}
	return label
}

// shortFingerprint is the 12 first characters of an image's fingerprint, as
// `incus image list` shows it.
func shortFingerprint(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}
