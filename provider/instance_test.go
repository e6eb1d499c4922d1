package provider

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus/api"
)

func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// testProject creates a throwaway project switchyard-test-<random> that sees the
// default project's images and profiles; it is deleted when t ends.
func testProject(t *testing.T, c *api.Client) string {
	t.Helper()
	name := randomName("switchyard-test-")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.CreateProject(ctx, api.ProjectsPost{Name: name, Description: "switchyard provider test",
		Config: map[string]string{"features.images": "false", "features.profiles": "false"}}); err != nil {
		t.Fatalf("create project %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.DeleteProject(ctx, name); err != nil && !api.IsNotFound(err) {
			t.Errorf("delete project %s: %v", name, err)
		}
	})
	return name
}

func mustMap(t *testing.T, v map[string]string) types.Map {
	t.Helper()
	m, d := types.MapValueFrom(context.Background(), types.StringType, v)
	if d.HasError() {
		t.Fatal(d)
	}
	return m
}

// The resource's life against the real daemon: create (started, booted), read,
// an outside change seen by read, update in place, delete, read of a deleted
// instance, delete of a deleted instance.
func TestInstanceResource(t *testing.T) {
	bed := testbed.Require(t)
	r := configuredFor[*instance](t, newInstance())
	project := testProject(t, r.c)
	name := randomName("sy-res-")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = r.c.SetState(ctx, project, name, "stop", true)
		_ = r.c.DeleteInstance(ctx, project, name)
	})
	var sresp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sresp)
	sch := sresp.Schema
	profiles, _ := types.ListValueFrom(ctx, types.StringType, []string{"default"})
	planned := instanceModel{
		ID: types.StringUnknown(), Name: types.StringValue(name), Project: types.StringValue(project),
		Image: types.StringValue(bed.Image), Type: types.StringValue(api.TypeContainer), Profiles: profiles,
		Config:  mustMap(t, map[string]string{"user.a": "1"}),
		Devices: types.MapNull(deviceType), Status: types.StringUnknown(),
	}
	plan := tfsdk.Plan{Schema: sch}
	if d := plan.Set(ctx, &planned); d.HasError() {
		t.Fatal(d)
	}
	cresp := resource.CreateResponse{State: tfsdk.State{Schema: sch}}
	start := time.Now()
	r.Create(ctx, resource.CreateRequest{Plan: plan}, &cresp)
	if cresp.Diagnostics.HasError() {
		t.Fatalf("create: %v", cresp.Diagnostics)
	}
	t.Logf("created and booted in %s", time.Since(start).Round(time.Millisecond))
	var m instanceModel
	if d := cresp.State.Get(ctx, &m); d.HasError() {
		t.Fatal(d)
	}
	if m.ID.ValueString() != project+"/"+name || m.Status.ValueString() != api.StatusRunning || !m.Devices.IsNull() ||
		m.Type.ValueString() != api.TypeContainer {
		t.Errorf("created: %+v", m)
	}
	if inst, err := r.c.Instance(ctx, project, name); err != nil || inst.Type != api.TypeContainer {
		t.Errorf("the instance's type: %v, %v; want %s", inst, err, api.TypeContainer)
	}
	var out bytes.Buffer
	if _, err := r.c.Exec(ctx, name, project, api.ExecRequest{Command: []string{"systemctl", "is-system-running"}}, nil, &out, nil); err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(out.String()); s != "running" && s != "degraded" {
		t.Errorf("after create, systemd is %q", s)
	}

	read := func(state tfsdk.State) (tfsdk.State, instanceModel) {
		t.Helper()
		rresp := resource.ReadResponse{State: state}
		r.Read(ctx, resource.ReadRequest{State: state}, &rresp)
		if rresp.Diagnostics.HasError() {
			t.Fatalf("read: %v", rresp.Diagnostics)
		}
		var m instanceModel
		if !rresp.State.Raw.IsNull() {
			if d := rresp.State.Get(ctx, &m); d.HasError() {
				t.Fatal(d)
			}
		}
		return rresp.State, m
	}
	state, m := read(cresp.State)
	if !state.Raw.Equal(cresp.State.Raw) {
		t.Errorf("read changed the state: %v -> %v", cresp.State.Raw, state.Raw)
	}
	// A state written before the resource had a type (null there) reads the type
	// from the daemon, so the default "container" plans no replacement.
	old := m
	old.Type = types.StringNull()
	oldState := tfsdk.State{Schema: sch}
	if d := oldState.Set(ctx, &old); d.HasError() {
		t.Fatal(d)
	}
	if _, got := read(oldState); got.Type.ValueString() != api.TypeContainer {
		t.Errorf("read of a state without type: type %v, want %s", got.Type, api.TypeContainer)
	}

	// A key set outside is seen (and the daemon's own keys are not).
	if err := r.c.PatchInstance(ctx, project, name, api.InstancePut{Config: map[string]string{"user.outside": "o"}}); err != nil {
		t.Fatal(err)
	}
	state, m = read(state)
	var cfg map[string]string
	m.Config.ElementsAs(ctx, &cfg, false)
	if len(cfg) != 2 || cfg["user.a"] != "1" || cfg["user.outside"] != "o" {
		t.Errorf("config after an outside change: %v", cfg)
	}

	// Update: user.a and user.outside go, user.b comes, a device is added.
	planned = m
	planned.Status = types.StringUnknown()
	planned.Config = mustMap(t, map[string]string{"user.b": "2"})
	dev, _ := types.MapValueFrom(ctx, deviceType, map[string]map[string]string{
		"shm": {"type": "disk", "source": "/dev/shm", "path": "/mnt/shm"}})
	planned.Devices = dev
	plan = tfsdk.Plan{Schema: sch}
	plan.Set(ctx, &planned)
	uresp := resource.UpdateResponse{State: state}
	r.Update(ctx, resource.UpdateRequest{Plan: plan, State: state}, &uresp)
	if uresp.Diagnostics.HasError() {
		t.Fatalf("update: %v", uresp.Diagnostics)
	}
	inst, err := r.c.Instance(ctx, project, name)
	if err != nil {
		t.Fatal(err)
	}
	if u := userConfig(inst.Config); len(u) != 1 || u["user.b"] != "2" || inst.Devices["shm"]["path"] != "/mnt/shm" ||
		inst.Config["volatile.base_image"] == "" || inst.Status != api.StatusRunning {
		t.Errorf("after update: %+v", inst)
	}
	state, m = read(uresp.State)
	if !state.Raw.Equal(uresp.State.Raw) {
		t.Errorf("read after update changed the state: %v -> %v", uresp.State.Raw, state.Raw)
	}

	// Delete, read (gone from the state), delete again.
	dresp := resource.DeleteResponse{}
	r.Delete(ctx, resource.DeleteRequest{State: state}, &dresp)
	if dresp.Diagnostics.HasError() {
		t.Fatalf("delete: %v", dresp.Diagnostics)
	}
	if _, err := r.c.Instance(ctx, project, name); !api.IsNotFound(err) {
		t.Errorf("instance after delete: %v", err)
	}
	if gone, _ := read(state); !gone.Raw.IsNull() {
		t.Errorf("read of a deleted instance kept it: %v", gone.Raw)
	}
	r.Delete(ctx, resource.DeleteRequest{State: state}, &dresp)
	if dresp.Diagnostics.HasError() {
		t.Errorf("second delete: %v", dresp.Diagnostics)
	}
}

// A missing image fails the create with an error that names the instance, and
// leaves nothing in the state.
func TestInstanceResourceNoImage(t *testing.T) {
	testbed.Require(t)
	r := configuredFor[*instance](t, newInstance())
	project := testProject(t, r.c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sresp resource.SchemaResponse
	r.Schema(ctx, resource.SchemaRequest{}, &sresp)
	profiles, _ := types.ListValueFrom(ctx, types.StringType, []string{"default"})
	planned := instanceModel{ID: types.StringUnknown(), Name: types.StringValue("sy-noimage"), Project: types.StringValue(project),
		Image: types.StringValue("no-such-image"), Type: types.StringValue(api.TypeContainer), Profiles: profiles, Config: types.MapNull(types.StringType),
		Devices: types.MapNull(deviceType), Status: types.StringUnknown()}
	plan := tfsdk.Plan{Schema: sresp.Schema}
	plan.Set(ctx, &planned)
	cresp := resource.CreateResponse{State: tfsdk.State{Schema: sresp.Schema}}
	r.Create(ctx, resource.CreateRequest{Plan: plan}, &cresp)
	if !cresp.Diagnostics.HasError() {
		t.Fatal("created from a missing image")
	}
	if d := cresp.Diagnostics.Errors()[0]; !strings.Contains(d.Detail(), project+"/sy-noimage") {
		t.Errorf("error does not name the instance: %s: %s", d.Summary(), d.Detail())
	} else {
		t.Logf("%s", d.Detail())
	}
	if !cresp.State.Raw.IsNull() {
		t.Errorf("state after a failed create: %v", cresp.State.Raw)
	}
}

func TestInstanceTypeValidator(t *testing.T) {
	ctx := context.Background()
	for value, ok := range map[string]bool{"container": true, "virtual-machine": true, "vm": false, "": false, "Container": false} {
		var resp validator.StringResponse
		instanceType{}.ValidateString(ctx, validator.StringRequest{Path: path.Root("type"), ConfigValue: types.StringValue(value)}, &resp)
		if resp.Diagnostics.HasError() == ok {
			t.Errorf("type %q: diagnostics %v, want valid %v", value, resp.Diagnostics, ok)
		}
	}
	var resp validator.StringResponse
	instanceType{}.ValidateString(ctx, validator.StringRequest{Path: path.Root("type"), ConfigValue: types.StringNull()}, &resp)
	if resp.Diagnostics.HasError() {
		t.Errorf("a null type (the default applies): %v", resp.Diagnostics)
	}
}
