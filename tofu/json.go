package tofu

import (
	"encoding/json"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"
)

// InitOptions are init's: -upgrade so a rebuilt switchyard binary's hash is taken
// again, -reconfigure so a changed backend setting takes effect without migration.
func InitOptions() []tfexec.InitOption {
	return []tfexec.InitOption{tfexec.Upgrade(true), tfexec.Reconfigure(true)}
}

// LogLine reads one line of OpenTofu's -json output: the node it concerns (if
// any), its level and message. ok is false for a line that is not a log message.
func LogLine(line []byte) (node, level, msg string, ok bool) {
	var l struct {
		Level   string `json:"@level"`
		Message string `json:"@message"`
		Type    string `json:"type"`
		Hook    struct {
			Resource struct {
				Addr string `json:"addr"`
			} `json:"resource"`
		} `json:"hook"`
		Change struct {
			Resource struct {
				Addr string `json:"addr"`
			} `json:"resource"`
		} `json:"change"`
		Diagnostic struct {
			Address string `json:"address"`
			Detail  string `json:"detail"`
		} `json:"diagnostic"`
	}
	if err := json.Unmarshal(line, &l); err != nil || l.Message == "" {
		return "", "", "", false
	}
	for _, a := range []string{l.Hook.Resource.Addr, l.Change.Resource.Addr, l.Diagnostic.Address} {
		if n := NodeOf(a); n != "" {
			node = n
			break
		}
	}
	level = l.Level
	switch level {
	case "error", "warn", "info":
	default:
		level = "info"
	}
	if d := strings.TrimSpace(l.Diagnostic.Detail); d != "" {
		l.Message += " (" + strings.Join(strings.Fields(d), " ") + ")"
	}
	if node != "" {
		msg = node + ": tofu: " + l.Message
	} else {
		msg = "tofu: " + l.Message
	}
	return node, level, msg, true
}

// Deployments lists the state's switchyard_deployment resources.
func Deployments(s *tfjson.State) []*tfjson.StateResource {
	var out []*tfjson.StateResource
	if s == nil || s.Values == nil {
		return nil
	}
	var walk func(m *tfjson.StateModule)
	walk = func(m *tfjson.StateModule) {
		if m == nil {
			return
		}
		for _, r := range m.Resources {
			if r.Type == ResourceType && r.Mode == tfjson.ManagedResourceMode {
				out = append(out, r)
			}
		}
		for _, c := range m.ChildModules {
			walk(c)
		}
	}
	walk(s.Values.RootModule)
	return out
}

// ChangedNodes says, per node the plan mentions, whether its deployment changes.
func ChangedNodes(p *tfjson.Plan) map[string]bool {
	out := map[string]bool{}
	if p == nil {
		return out
	}
	for _, rc := range p.ResourceChanges {
		if rc.Type != ResourceType || rc.Change == nil {
			continue
		}
		node := NodeOf(rc.Address)
		if node == "" {
			continue
		}
		out[node] = out[node] || !(rc.Change.Actions.NoOp() || rc.Change.Actions.Read())
	}
	return out
}

// Int reads a number of OpenTofu's JSON (a json.Number or a float64); 0 otherwise.
func Int(v any) int {
	switch n := v.(type) {
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	case float64:
		return int(n)
	}
	return 0
}
