package spire

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// AgentPathPrefix is the path under which switchyard names the nodes' agents.
// SPIRE refuses agent IDs under its reserved /spire/ namespace for a join
// token's alias, so the agents live under /switchyard/agent/. A workload ID has
// three segments (group/node/app), an agent ID four: they never collide.
const AgentPathPrefix = "/switchyard/agent/"

// AgentID is the SPIFFE ID of a node's agent: the alias SPIRE maps the join
// token's agent ID to, and the parent of the node's workload entries.
func AgentID(trustDomain, group, node string) string {
	return "spiffe://" + trustDomain + AgentPathPrefix + group + "/" + node
}

// WorkloadID is the SPIFFE ID of an application on a node.
func WorkloadID(trustDomain, group, node, app string) string {
	return "spiffe://" + trustDomain + "/" + group + "/" + node + "/" + app
}

// EntryIDPrefix starts every entry ID switchyard derives.
const EntryIDPrefix = "switchyard-"

// EntryID is the registration entry ID of a unit of an application on a node:
// derived, so that an apply finds the entry it made before and a destroy
// deletes exactly it. It is printable ASCII and 43 characters long, well within
// SPIRE's limit of 255. The parts are joined by NUL so that no two different
// tuples hash alike.
func EntryID(group, node, app, unit string) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{group, node, app, unit}, "\x00")))
	return EntryIDPrefix + hex.EncodeToString(sum[:16])
}

// SystemdSelector is the workload selector of a systemd unit.
func SystemdSelector(unit string) string { return "systemd:id:" + unit }

// spiffeID is a SPIFFE ID split into its trust domain and path.
type spiffeID struct{ td, path string }

func (id spiffeID) String() string { return "spiffe://" + id.td + id.path }

// parseID splits "spiffe://td/path". SPIRE checks the characters; this only
// refuses what cannot be a SPIFFE ID at all.
func parseID(s string) (spiffeID, error) {
	rest, ok := strings.CutPrefix(s, "spiffe://")
	if !ok {
		return spiffeID{}, fmt.Errorf("SPIFFE ID %q: want spiffe://<trust domain>/<path>", s)
	}
	td, path, _ := strings.Cut(rest, "/")
	if td == "" {
		return spiffeID{}, fmt.Errorf("SPIFFE ID %q: no trust domain", s)
	}
	if path != "" {
		path = "/" + path
	}
	return spiffeID{td: td, path: path}, nil
}

// parseSelector splits "type:value" at the first colon ("systemd:id:a.service"
// is type systemd, value id:a.service).
func parseSelector(s string) (typ, value string, err error) {
	typ, value, ok := strings.Cut(s, ":")
	if !ok || typ == "" || value == "" {
		return "", "", fmt.Errorf("selector %q: want <type>:<value>", s)
	}
	return typ, value, nil
}
