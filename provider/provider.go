// Package provider is switchyard's own OpenTofu provider (SPEC 7), served by the
// switchyard binary itself when OpenTofu starts it as a plugin. Its resource
// switchyard_deployment is a node: create and update run the deploy body over SSH
// or through the local Incus daemon, and the verdict, the deployed toplevel and
// the previous generation are kept in state. Delete forgets the node and never
// touches it. switchyard_incus_instance (tf-incus) is an Incus instance of the
// local daemon, close to the public Incus provider's incus_instance; its delete
// deletes the instance.
package provider

import (
	"context"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/switchyard-nix/switchyard/redact"
)

// Address is the provider's source address; the generated CLI configuration
// installs it from a filesystem mirror.
const Address = "registry.opentofu.org/switchyard-nix/switchyard"

// Version is the provider version the generated configuration requires and the
// mirror directory is named after. The binary's hash is refreshed on every init, so
// a rebuilt binary keeps the same provider version.
const Version = "0.1.0"

// MagicCookieEnv is set in a plugin's environment when OpenTofu (or Terraform)
// starts it.
const MagicCookieEnv = "TF_PLUGIN_MAGIC_COOKIE"

// IsPlugin says whether this process was started as a provider plugin.
func IsPlugin() bool { return os.Getenv(MagicCookieEnv) != "" }

// Serve serves the provider over the plugin protocol until OpenTofu stops it or
// dies, its diagnostics redacted (redacting).
func Serve(ctx context.Context) error {
	return tf6server.Serve(Address, func() tfprotov6.ProviderServer {
		return newRedacting(providerserver.NewProtocol6(New())())
	})
}

// New makes the provider.
func New() provider.Provider { return &switchyardProvider{} }

type switchyardProvider struct{}

func (p *switchyardProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "switchyard"
	resp.Version = Version
}

func (p *switchyardProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{Description: "switchyard: NixOS deployments with a verdict per node. Credentials come from the run the switchyard CLI hands it (provider/contract)."}
}

// Configure reads the run once: the contract the CLI encoded (contract.Decode) and
// the DEPLOY_* variables, and hands the session to every resource and data source.
// The run's key files join the redaction before anything reaches a node.
func (p *switchyardProvider) Configure(_ context.Context, _ provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	s, err := newSession(os.Getenv)
	if err != nil {
		resp.Diagnostics.AddError("switchyard run", err.Error())
		return
	}
	redact.Default.AddFile(s.run.KeyFiles()...)
	resp.ResourceData, resp.DataSourceData = s, s
}

func (p *switchyardProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		newDeployment, newInstance, newVerdict,
		newProject,
		newDNSRRSet,
		newSpireAgent, newSpireEntry,
	}
}

func (p *switchyardProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newAddresses}
}
