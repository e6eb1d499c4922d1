package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// The provider's schema as OpenTofu gets it: one resource, switchyard_deployment,
// whose verdict and generations are computed and whose inputs include nixos_conf.
func TestSchema(t *testing.T) {
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
	s, ok := resp.ResourceSchemas["switchyard_deployment"]
	if !ok || len(resp.ResourceSchemas) != 1 {
		t.Fatalf("resources %v", resp.ResourceSchemas)
	}
	attrs := map[string]*tfprotov6.SchemaAttribute{}
	for _, a := range s.Block.Attributes {
		attrs[a.Name] = a
	}
	for _, name := range []string{"node", "nixos_conf", "drv", "host"} {
		if a := attrs[name]; a == nil || !a.Required {
			t.Errorf("%s: not a required input", name)
		}
	}
	for _, name := range []string{"toplevel", "previous", "verdict", "ok", "exit_code"} {
		if a := attrs[name]; a == nil || !a.Computed || a.Optional || a.Required {
			t.Errorf("%s: not computed only", name)
		}
	}
	for name := range attrs {
		if name == "ssh_key_file" || name == "key_file" {
			t.Errorf("a credential in the schema: %s", name)
		}
	}
}
