package effects

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/switchyard-nix/switchyard/localcmd"
)

// DryActivation is what `switch-to-configuration dry-activate` of a generation says a
// switch to it would do to the node's units (switch-to-configuration-ng's dry-run
// lines), read on the node before anything is switched.
type DryActivation struct {
	Stop           []string `json:"stop"`            // "would stop the following units"
	NotStopped     []string `json:"not_restarted"`   // "would NOT stop the following changed units"
	Reload         []string `json:"reload"`          // "would reload the following units"
	Restart        []string `json:"restart"`         // "would restart the following units"
	Start          []string `json:"start"`           // "would start the following units"
	RestartSystemd bool     `json:"restart_systemd"` // "would restart systemd"
	// RebootNeeded: the generation's init is incompatible with the running one
	// (exit 100): a switch would activate nothing.
	RebootNeeded bool `json:"reboot_needed,omitempty"`
}

// dryLists are ng's dry-activate line prefixes and the list each fills.
func (d *DryActivation) dryLists() []struct {
	prefix string
	list   *[]string
} {
	return []struct {
		prefix string
		list   *[]string
	}{
		{"would stop the following units: ", &d.Stop},
		{"would NOT stop the following changed units: ", &d.NotStopped},
		{"would reload the following units: ", &d.Reload},
		{"would restart the following units: ", &d.Restart},
		{"would start the following units: ", &d.Start},
	}
}

// ParseDryActivate reads dry-activate's stderr. Lines it does not know (the
// activation script's dry run, warnings) are ignored; each list is at most 10,000
// units (a node's answer is bounded before it is believed).
func ParseDryActivate(out string) DryActivation {
	// Empty lists, not null, in the plan event: every list was read.
	d := DryActivation{Stop: []string{}, NotStopped: []string{}, Reload: []string{}, Restart: []string{}, Start: []string{}}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "would restart systemd" {
			d.RestartSystemd = true
			continue
		}
		for _, l := range d.dryLists() {
			if rest, ok := strings.CutPrefix(line, l.prefix); ok {
				for _, u := range strings.Split(rest, ", ") {
					if u = strings.TrimSpace(u); u != "" && len(*l.list) < 10000 {
						*l.list = append(*l.list, u)
					}
				}
			}
		}
	}
	return d
}

// DryActivate runs the generation's `switch-to-configuration dry-activate` on the
// node (the closure must be there) and reads what a switch would do. Exit 100 is an
// init the running system cannot switch to: RebootNeeded, with no lists.
func DryActivate(ctx context.Context, t Transport, toplevel string) (DryActivation, error) {
	var stderr bytes.Buffer
	code, err := t.Run(ctx, Command{Argv: []string{toplevel + "/bin/switch-to-configuration", "dry-activate"}, Stderr: &stderr})
	switch {
	case err != nil:
		return DryActivation{}, fmt.Errorf("dry-activate: %w", err)
	case code == 100:
		return DryActivation{RebootNeeded: true}, nil
	case code != 0:
		return DryActivation{}, fmt.Errorf("dry-activate exited %d: %s", code, localcmd.LastLine(stderr.String()))
	}
	return ParseDryActivate(stderr.String()), nil
}

// Build builds the toplevel of s on this machine, or checks it is there, as the
// build phase does: the plan verb builds what it dry-activates on a node.
func Build(ctx context.Context, s Source) (string, error) { return resolveToplevel(ctx, s) }

// Lines are the dry activation in ng's words, one per non-empty list: what the text
// output shows under a node's plan line.
func (d DryActivation) Lines() []string {
	if d.RebootNeeded {
		return []string{"would not activate: its init is incompatible with the running one (a reboot runs it)"}
	}
	var out []string
	if d.RestartSystemd {
		out = append(out, "would restart systemd")
	}
	for _, l := range d.dryLists() {
		if len(*l.list) > 0 {
			out = append(out, strings.TrimSuffix(l.prefix, " ")+" "+strings.Join(*l.list, ", "))
		}
	}
	return out
}
