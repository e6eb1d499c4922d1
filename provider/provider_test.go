package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// providerSchemas is the provider's schema as OpenTofu gets it.
func providerSchemas(t *testing.T) (tfprotov6.ProviderServer, map[string]map[string]*tfprotov6.SchemaAttribute) {
	t.Helper()
	srv, err := providerserver.NewProtocol6WithError(New())()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Diagnostics {
		t.Errorf("diagnostic: %s: %s", d.Summary, d.Detail)
	}
	out := map[string]map[string]*tfprotov6.SchemaAttribute{}
	for name, s := range resp.ResourceSchemas {
		attrs := map[string]*tfprotov6.SchemaAttribute{}
		for _, a := range s.Block.Attributes {
			attrs[a.Name] = a
		}
		if len(s.Block.BlockTypes) != 0 {
			t.Errorf("%s: blocks %v", name, s.Block.BlockTypes)
		}
		out[name] = attrs
	}
	return srv, out
}

// kind is how an attribute is given: "required", "optional", "optional+computed"
// or "computed".
func kind(a *tfprotov6.SchemaAttribute) string {
	switch {
	case a.Required && !a.Optional && !a.Computed:
		return "required"
	case a.Optional && a.Computed && !a.Required:
		return "optional+computed"
	case a.Optional && !a.Required && !a.Computed:
		return "optional"
	case a.Computed && !a.Required && !a.Optional:
		return "computed"
	}
	return "?"
}

type wantAttr struct {
	kind string
	typ  tftypes.Type
}

func checkAttrs(t *testing.T, resource string, got map[string]*tfprotov6.SchemaAttribute, want map[string]wantAttr) {
	t.Helper()
	for name, w := range want {
		a := got[name]
		if a == nil {
			t.Errorf("%s.%s: missing", resource, name)
			continue
		}
		if k := kind(a); k != w.kind {
			t.Errorf("%s.%s: %s, want %s", resource, name, k, w.kind)
		}
		if !a.Type.Equal(w.typ) {
			t.Errorf("%s.%s: type %s, want %s", resource, name, a.Type, w.typ)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s.%s: not expected", resource, name)
		}
		if name == "ssh_key_file" || name == "key_file" {
			t.Errorf("a credential in the schema: %s.%s", resource, name)
		}
	}
}

// The provider's resources as OpenTofu gets them: switchyard_deployment, whose
// verdict and generations are computed, whose inputs include nixos_conf and which
// reaches its node over SSH (host) or Incus (incus_instance); and
// switchyard_incus_instance, named as the public Incus provider's incus_instance.
func TestSchema(t *testing.T) {
	_, schemas := providerSchemas(t)
	for _, name := range []string{"switchyard_deployment", "switchyard_incus_instance", "switchyard_verdict",
		"switchyard_incus_project", "switchyard_dns_rrset", "switchyard_spire_agent", "switchyard_spire_entry"} {
		if schemas[name] == nil {
			t.Errorf("no resource %s among %v", name, schemas)
		}
	}
	str, num, boolean := tftypes.String, tftypes.Number, tftypes.Bool
	checkAttrs(t, "switchyard_deployment", schemas["switchyard_deployment"], map[string]wantAttr{
		"id":               {"computed", str},
		"node":             {"required", str},
		"nixos_conf":       {"required", str},
		"drv":              {"required", str},
		"host":             {"optional", str},
		"port":             {"optional", num},
		"user":             {"optional", str},
		"host_key":         {"optional", str},
		"known_hosts_file": {"optional", str},
		"incus_instance":   {"optional", str},
		"incus_project":    {"optional", str},
		"defer_verdict":    {"optional", boolean},
		"toplevel":         {"computed", str},
		"previous":         {"computed", str},
		"verdict":          {"computed", str},
		"held":             {"computed", str},
		"drift":            {"computed", str},
		"ok":               {"computed", boolean},
		"exit_code":        {"computed", num},
		"receipt":          {"computed", str},
	})
	checkAttrs(t, "switchyard_verdict", schemas["switchyard_verdict"], map[string]wantAttr{
		"id":             {"computed", str},
		"node":           {"required", str},
		"incus_instance": {"required", str},
		"incus_project":  {"required", str},
		"deployment":     {"required", str},
		"identity":       {"required", str},
		"toplevel":       {"computed", str},
		"verdict":        {"computed", str},
		"ok":             {"computed", boolean},
		"exit_code":      {"computed", num},
	})
	checkAttrs(t, "switchyard_incus_instance", schemas["switchyard_incus_instance"], map[string]wantAttr{
		"name":     {"required", str},
		"project":  {"optional+computed", str},
		"image":    {"required", str},
		"type":     {"optional+computed", str},
		"profiles": {"optional+computed", tftypes.List{ElementType: str}},
		"config":   {"optional", tftypes.Map{ElementType: str}},
		"devices":  {"optional", tftypes.Map{ElementType: tftypes.Map{ElementType: str}}},
		"id":       {"computed", str},
		"status":   {"computed", str},
		"uuid":     {"computed", str},
	})
}

// deploymentConfig is a switchyard_deployment configuration with host and
// incus_instance as given (nil: null).
func deploymentConfig(t *testing.T, host, inst any) *tfprotov6.DynamicValue {
	t.Helper()
	_, schemas := providerSchemas(t)
	attrTypes := map[string]tftypes.Type{}
	vals := map[string]tftypes.Value{}
	for name, a := range schemas["switchyard_deployment"] {
		attrTypes[name] = a.Type
		vals[name] = tftypes.NewValue(a.Type, nil)
	}
	vals["node"] = tftypes.NewValue(tftypes.String, "web1")
	vals["nixos_conf"] = tftypes.NewValue(tftypes.String, "c")
	vals["drv"] = tftypes.NewValue(tftypes.String, "/nix/store/x.drv")
	vals["host"] = tftypes.NewValue(tftypes.String, host)
	vals["incus_instance"] = tftypes.NewValue(tftypes.String, inst)
	obj := tftypes.Object{AttributeTypes: attrTypes}
	dv, err := tfprotov6.NewDynamicValue(obj, tftypes.NewValue(obj, vals))
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

// Exactly one of host and incus_instance: both or neither is refused at
// validation; an unknown one waits for the apply.
func TestDeploymentValidateTransport(t *testing.T) {
	srv, _ := providerSchemas(t)
	for _, c := range []struct {
		host, inst any
		ok         bool
	}{
		{"192.0.2.1", nil, true},
		{nil, "web1", true},
		{"192.0.2.1", "web1", false},
		{nil, nil, false},
		{tftypes.UnknownValue, nil, true},
		{nil, tftypes.UnknownValue, true},
	} {
		resp, err := srv.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{
			TypeName: "switchyard_deployment", Config: deploymentConfig(t, c.host, c.inst)})
		if err != nil {
			t.Fatal(err)
		}
		if ok := len(resp.Diagnostics) == 0; ok != c.ok {
			t.Errorf("host %v incus_instance %v: diagnostics %v, want ok %v", c.host, c.inst, resp.Diagnostics, c.ok)
			for _, d := range resp.Diagnostics {
				t.Logf("%s: %s", d.Summary, d.Detail)
			}
		}
	}
}

// The deployment's transport: SSH to host, Incus to incus_instance.
func TestDeploymentTransport(t *testing.T) {
	m := deploymentModel{}
	m.IncusInstance = types.StringValue("web1")
	m.IncusProject = types.StringValue("tenant-a")
	m.Host = types.StringNull()
	s := testSession(t)
	tr, err := m.transport(s)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Target() != "incus tenant-a/web1" {
		t.Errorf("target %q", tr.Target())
	}
	tr.Close()
	m.IncusProject = types.StringNull()
	if tr, err = m.transport(s); err != nil || tr.Target() != "incus default/web1" {
		t.Errorf("default project: %v", err)
	}
	m.Host = types.StringValue("192.0.2.1")
	if _, err := m.transport(s); err == nil {
		t.Error("both host and incus_instance accepted at apply")
	}
	m.IncusInstance = types.StringNull()
	if tr, err = m.transport(s); err != nil || tr.Target() == "" || tr.Target()[:3] != "ssh" {
		t.Errorf("ssh: %v", err)
	}
}
