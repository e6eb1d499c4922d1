package provider

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/verdict"
)

// Under apply --mode boot the pass after registration judges nothing and contacts
// no node: the node runs the generation before until it boots (issue 34 item 2).
func TestVerdictPassUnderModeBoot(t *testing.T) {
	s := &session{deploy: effects.Config{Mode: effects.ModeBoot}}
	m := verdictModel{Node: types.StringValue("web1"), IncusInstance: types.StringValue("no-such-instance"),
		IncusProject: types.StringValue("default")}
	m.judge(context.Background(), s, func(summary, detail string) { t.Errorf("failed: %s: %s", summary, detail) })
	var v verdict.Verdict
	if err := json.Unmarshal([]byte(m.Verdict.ValueString()), &v); err != nil {
		t.Fatal(err)
	}
	if !m.OK.ValueBool() || m.ExitCode.ValueInt64() != 0 || v.Switch.Result != verdict.SwitchBoot || v.Pass != verdict.PassVerdictOnly {
		t.Errorf("ok %v, exit %d, verdict %+v; want a pass that did not judge", m.OK, m.ExitCode.ValueInt64(), v)
	}
}
