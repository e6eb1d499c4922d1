package tofu

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/switchyard-nix/switchyard/redact"
)

// InitOptions are init's: -upgrade so a rebuilt switchyard binary's hash is taken
// again, -reconfigure so a changed backend setting takes effect without migration.
func InitOptions() []tfexec.InitOption {
	return []tfexec.InitOption{tfexec.Upgrade(true), tfexec.Reconfigure(true)}
}

// Line is one log message of OpenTofu's -json output.
type Line struct {
	Node   string // the node it concerns, "" for none
	Level  string // error, warn or info
	Msg    string // "tofu: ..." or "<node>: tofu: ..."
	Locked bool   // the diagnostic of a state lock held by another run
}

// LogLine reads one line of OpenTofu's -json output. ok is false for a line that is
// not a log message.
func LogLine(line []byte) (l Line, ok bool) {
	var j struct {
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
			Summary string `json:"summary"`
			Detail  string `json:"detail"`
		} `json:"diagnostic"`
	}
	if err := json.Unmarshal(line, &j); err != nil || j.Message == "" {
		return Line{}, false
	}
	for _, a := range []string{j.Hook.Resource.Addr, j.Change.Resource.Addr, j.Diagnostic.Address} {
		if n := NodeOf(a); n != "" {
			l.Node = n
			break
		}
	}
	l.Level = j.Level
	switch l.Level {
	case "error", "warn", "info":
	default:
		l.Level = "info"
	}
	l.Locked = j.Type == "diagnostic" && j.Diagnostic.Summary == lockSummary
	if d := strings.TrimSpace(j.Diagnostic.Detail); d != "" {
		j.Message += " (" + strings.Join(strings.Fields(d), " ") + ")"
	}
	// A diagnostic may quote a credential (SPEC 6.9).
	j.Message = redact.Default.String(j.Message)
	if l.Node != "" {
		l.Msg = l.Node + ": tofu: " + j.Message
	} else {
		l.Msg = "tofu: " + j.Message
	}
	return l, true
}

// Deployments reads the switchyard_deployment instances of a state as `state pull`
// gives it (format version 4): node to its attributes. Reading the pulled state
// needs no provider, unlike `show -json`.
func Deployments(state []byte) (map[string]map[string]any, error) {
	return Resources(state, ResourceType)
}

// Resources reads the instances of the resource <typ>.node of a state as Deployments
// does: node to its attributes.
func Resources(state []byte, typ string) (map[string]map[string]any, error) {
	all, err := ResourcesOf(state, typ)
	return all[typ], err
}

// ResourcesOf reads the instances of the resources <typ>.node of each of types in one
// decoding of a state: type to node to its attributes (an empty map for a type the
// state does not hold).
func ResourcesOf(state []byte, types ...string) (map[string]map[string]map[string]any, error) {
	out := map[string]map[string]map[string]any{}
	for _, typ := range types {
		out[typ] = map[string]map[string]any{}
	}
	if len(bytes.TrimSpace(state)) == 0 {
		return out, nil
	}
	var s struct {
		Version   int `json:"version"`
		Resources []struct {
			Module    string `json:"module"`
			Mode      string `json:"mode"`
			Type      string `json:"type"`
			Name      string `json:"name"`
			Instances []struct {
				IndexKey   any            `json:"index_key"`
				Attributes map[string]any `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	d := json.NewDecoder(bytes.NewReader(state))
	d.UseNumber()
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if s.Version != 4 {
		return nil, fmt.Errorf("state: format version %d, want 4", s.Version)
	}
	for _, r := range s.Resources {
		nodes, ok := out[r.Type]
		if !ok || r.Module != "" || r.Mode != "managed" {
			continue
		}
		for _, i := range r.Instances {
			if node := instanceNode(r.Name, i.IndexKey); node != "" {
				nodes[node] = i.Attributes
			}
		}
	}
	return out, nil
}

// instanceNode is the node of the instance key of the resource block name: the key
// of the shared block "node", or the node of its own block "node_<node>" (Layout);
// "" for another block.
func instanceNode(name string, key any) string {
	if k, ok := key.(string); ok && name == ResourceName {
		return k
	}
	if node, ok := strings.CutPrefix(name, ResourceName+"_"); ok && key == nil {
		return node
	}
	return ""
}

// OwnBlocks is the nodes whose deployment a state holds in a block of its own
// (Layout), as Resources reads it.
func OwnBlocks(state []byte) (map[string]bool, error) {
	own := map[string]bool{}
	if len(bytes.TrimSpace(state)) == 0 {
		return own, nil
	}
	var s struct {
		Resources []struct {
			Module, Mode, Type, Name string
			Instances                []struct {
				IndexKey any `json:"index_key"`
			}
		}
	}
	if err := json.Unmarshal(state, &s); err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	for _, r := range s.Resources {
		if r.Type != ResourceType || r.Module != "" || r.Mode != "managed" || r.Name == ResourceName {
			continue
		}
		for _, i := range r.Instances {
			if node := instanceNode(r.Name, i.IndexKey); node != "" {
				own[node] = true
			}
		}
	}
	return own, nil
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

// ChangedInstances are the nodes whose Incus instance the plan changes in place or
// replaces (limits, profiles, image, type); creating one for a new node, reading or
// deleting one is not in it.
func ChangedInstances(p *tfjson.Plan) map[string]bool {
	return instancesWhere(p, func(a tfjson.Actions) bool { return a.Update() || a.Replace() })
}

// NewInstances are the nodes whose Incus instance the plan creates or replaces:
// before the apply, that instance does not exist as planned (a new node's is not
// there at all; a replaced one is deleted and made anew from its image), so nothing
// on it can say what the planned generation would do. An update in place keeps the
// instance and is not in it.
func NewInstances(p *tfjson.Plan) map[string]bool {
	return instancesWhere(p, func(a tfjson.Actions) bool { return a.Create() || a.Replace() })
}

// instancesWhere are the nodes whose Incus instance's planned actions satisfy want.
func instancesWhere(p *tfjson.Plan, want func(tfjson.Actions) bool) map[string]bool {
	out := map[string]bool{}
	if p == nil {
		return out
	}
	for _, rc := range p.ResourceChanges {
		if rc.Type != InstanceType || rc.Change == nil {
			continue
		}
		if node := NodeOf(rc.Address); node != "" && want(rc.Change.Actions) {
			out[node] = true
		}
	}
	return out
}

// Drifted is, per node whose deployment the plan's refresh found drifted (Read: run
// or booted by hand), how it departs from its toplevel.
func Drifted(p *tfjson.Plan) map[string]string {
	out := map[string]string{}
	if p == nil {
		return out
	}
	for _, rc := range p.ResourceDrift {
		if rc.Type != ResourceType || rc.Change == nil {
			continue
		}
		after, _ := rc.Change.After.(map[string]any)
		if d, _ := after["drift"].(string); d != "" {
			if node := NodeOf(rc.Address); node != "" {
				out[node] = d
			}
		}
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
