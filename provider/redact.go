package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/switchyard-nix/switchyard/redact"
)

// redacting is the provider's protocol server with the summary and detail of every
// diagnostic of its main calls redacted (SPEC 6.9): an error of a tool or server the
// provider reaches (an SSH or Incus key file, a DNS server's answer) never carries a
// credential's content to OpenTofu's output. The key files the CLI hands the provider
// are added to redact.Default by the provider's Configure; the TSIG key's secret is added as
// dnsupdate.ReadKeyFile reads it.
type redacting struct{ tfprotov6.ProviderServer }

func newRedacting(s tfprotov6.ProviderServer) tfprotov6.ProviderServer { return redacting{s} }

func redactDiags(ds []*tfprotov6.Diagnostic) {
	for _, d := range ds {
		if d != nil {
			d.Summary = redact.Default.String(d.Summary)
			d.Detail = redact.Default.String(d.Detail)
		}
	}
}

func (r redacting) ConfigureProvider(ctx context.Context, req *tfprotov6.ConfigureProviderRequest) (*tfprotov6.ConfigureProviderResponse, error) {
	resp, err := r.ProviderServer.ConfigureProvider(ctx, req)
	if resp != nil {
		redactDiags(resp.Diagnostics)
	}
	return resp, redact.Default.Error(err)
}

func (r redacting) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	resp, err := r.ProviderServer.ReadResource(ctx, req)
	if resp != nil {
		redactDiags(resp.Diagnostics)
	}
	return resp, redact.Default.Error(err)
}

func (r redacting) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := r.ProviderServer.PlanResourceChange(ctx, req)
	if resp != nil {
		redactDiags(resp.Diagnostics)
	}
	return resp, redact.Default.Error(err)
}

func (r redacting) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	resp, err := r.ProviderServer.ApplyResourceChange(ctx, req)
	if resp != nil {
		redactDiags(resp.Diagnostics)
	}
	return resp, redact.Default.Error(err)
}

func (r redacting) ImportResourceState(ctx context.Context, req *tfprotov6.ImportResourceStateRequest) (*tfprotov6.ImportResourceStateResponse, error) {
	resp, err := r.ProviderServer.ImportResourceState(ctx, req)
	if resp != nil {
		redactDiags(resp.Diagnostics)
	}
	return resp, redact.Default.Error(err)
}

func (r redacting) ReadDataSource(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	resp, err := r.ProviderServer.ReadDataSource(ctx, req)
	if resp != nil {
		redactDiags(resp.Diagnostics)
	}
	return resp, redact.Default.Error(err)
}

func (r redacting) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	resp, err := r.ProviderServer.ValidateResourceConfig(ctx, req)
	if resp != nil {
		redactDiags(resp.Diagnostics)
	}
	return resp, redact.Default.Error(err)
}
