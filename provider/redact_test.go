package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/switchyard-nix/switchyard/redact"
)

type diagServer struct{ tfprotov6.ProviderServer }

func (diagServer) ApplyResourceChange(context.Context, *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	return &tfprotov6.ApplyResourceChangeResponse{Diagnostics: []*tfprotov6.Diagnostic{
		{Severity: tfprotov6.DiagnosticSeverityError, Summary: "deploy MARKER-provider-secret", Detail: "saw MARKER-provider-secret"},
	}}, errors.New("rpc MARKER-provider-secret")
}

// SPEC 6.9: a diagnostic the provider reports never carries a credential redact.Default holds.
func TestRedactingDiagnostics(t *testing.T) {
	redact.Default.Add("MARKER-provider-secret")
	resp, err := newRedacting(diagServer{}).ApplyResourceChange(context.Background(), nil)
	d := resp.Diagnostics[0]
	for _, s := range []string{d.Summary, d.Detail, err.Error()} {
		if strings.Contains(s, "MARKER") || !strings.Contains(s, redact.Mark) {
			t.Errorf("not redacted: %q", s)
		}
	}
}
