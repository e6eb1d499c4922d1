package tofu

import (
	"fmt"
	"sort"
	"strings"
)

// Tenant is what tf-incus-operator adds to the graph of its Incus nodes (SPEC 7.1):
// the tenants' projects, their DNS records, their workload identities, and the
// verdict-only pass after registration that gives each node its verdict.
type Tenant struct {
	Projects []Project // the instances' projects (Instance.Project names one)
	DNS      *DNS      // nil: no DNS records
	Spire    *Spire    // nil: no workload identities
}

// Project is a tenant's Incus project, switchyard_incus_project.tenant["<name>"].
type Project struct {
	Name, Description string
	Config            map[string]string
}

// DNS is the tenant domain's records, each RRset a switchyard_dns_rrset.
type DNS struct {
	Server string // host:port of the zone's primary
	Zone   string // FQDN
	// RRsets are the tree's records, canonical: switchyard_dns_rrset.address["<name> <type>"]
	// for A and AAAA, switchyard_dns_rrset.record["<name> <type>"] for the others.
	RRsets []RRset
	// Domain is the tenant domain (FQDN): each node's addresses as Incus reports them
	// are <node>.<Domain> A and AAAA (switchyard_dns_rrset.node_a / node_aaaa), with
	// NodeTTL.
	Domain  string
	NodeTTL int
}

// RRset is one owned RRset.
type RRset struct {
	Name, Type string // FQDN, record type
	TTL        int
	Records    []string // canonical presentation, sorted
}

// Key is the RRset's key in switchyard_dns_rrset.record.
func (r RRset) Key() string { return r.Name + " " + r.Type }

// Spire is the SPIRE server the identities are registered with.
type Spire struct {
	Server      string // unix:///path of the server API socket
	TrustDomain string
}

// Entry is one registration entry of a node's application unit,
// switchyard_spire_entry.unit["<Key>"]; its parent is the node's agent.
type Entry struct {
	Key       string // "<node>/<application>/<unit>"
	ID        string
	SpiffeID  string
	Selectors []string
}

// Resource types of tf-incus-operator's graph.
const (
	ProjectType   = "switchyard_incus_project"
	RRsetType     = "switchyard_dns_rrset"
	AgentType     = "switchyard_spire_agent"
	EntryType     = "switchyard_spire_entry"
	VerdictType   = "switchyard_verdict"
	AddressesType = "switchyard_incus_addresses"
)

// addTenant adds t's resources to cfg, the configuration of nodes (Incus nodes
// only), and ties the instances and deployments to them:
//
//	project -> instance -> deployment (defer_verdict) -> agent (join token pushed)
//	agent -> entries -> verdict (the node's verdict)
//	deployment -> addresses -> node A/AAAA records;  static records stand alone
func addTenant(cfg map[string]any, nodes []Node, each map[string]any, t *Tenant) error {
	if len(nodes) == 0 {
		// Nothing of a tenant stays without its nodes: an empty graph destroys it all.
		return nil
	}
	res := cfg["resource"].(map[string]any)
	instance := res[InstanceType].(map[string]any)[ResourceName].(map[string]any)
	deployment := res[ResourceType].(map[string]any)[ResourceName].(map[string]any)
	projects := map[string]any{}
	for _, p := range t.Projects {
		config := map[string]any{}
		for k, v := range p.Config {
			config[escape(k)] = escape(v)
		}
		projects[escape(p.Name)] = map[string]any{"description": escape(p.Description), "config": config}
	}
	for _, n := range nodes {
		if _, ok := projects[escape(n.Instance.Project)]; !ok {
			return fmt.Errorf("%s: project %q is not a tenant's", n.Name, n.Instance.Project)
		}
	}
	cfg["locals"].(map[string]any)["projects"] = projects
	if len(projects) > 0 {
		res[ProjectType] = map[string]any{"tenant": map[string]any{
			"for_each":    "${local.projects}",
			"name":        "${each.key}",
			"description": "${each.value.description}",
			"config":      "${each.value.config}",
		}}
		// The instance is made in its project, after it, and deleted before it.
		instance["project"] = "${" + ProjectType + ".tenant[each.value.project].name}"
	}
	deployment["defer_verdict"] = true

	identity := "${\"\"}"
	if t.Spire != nil {
		agent := AgentType + "." + ResourceName
		res[AgentType] = map[string]any{ResourceName: map[string]any{
			"for_each":       "${local.nodes}",
			"server":         escape(t.Spire.Server),
			"trust_domain":   escape(t.Spire.TrustDomain),
			"group":          "${each.value.group}",
			"node":           "${each.key}",
			"incus_instance": "${" + InstanceType + "." + ResourceName + "[each.key].name}",
			"incus_project":  "${" + InstanceType + "." + ResourceName + "[each.key].project}",
			// A new instance holds no token: it gets a new one. Only a new one: an
			// instance changed in place (limits) keeps its agent and token.
			"lifecycle": map[string]any{"replace_triggered_by": []string{InstanceType + "." + ResourceName + "[each.key].uuid"}},
			// The identity is given to a deployed node: what waits for it there (the
			// agent's path unit, units failing without it) is judged by the pass
			// after registration, and a node whose deploy failed gets none.
			"depends_on": []string{ResourceType + "." + ResourceName},
		}}
		entries := map[string]any{}
		for _, n := range nodes {
			keys := []string{}
			for _, e := range n.Entries {
				sel := append([]string(nil), e.Selectors...)
				entries[escape(e.Key)] = map[string]any{"node": escape(n.Name), "entry_id": escape(e.ID),
					"spiffe_id": escape(e.SpiffeID), "selectors": escapeAll(sel)}
				keys = append(keys, escape(e.Key))
			}
			sort.Strings(keys)
			each[escape(n.Name)].(map[string]any)["entries"] = keys
		}
		cfg["locals"].(map[string]any)["entries"] = entries
		if len(entries) > 0 {
			res[EntryType] = map[string]any{"unit": map[string]any{
				"for_each":  "${local.entries}",
				"server":    escape(t.Spire.Server),
				"entry_id":  "${each.value.entry_id}",
				"spiffe_id": "${each.value.spiffe_id}",
				"parent_id": "${" + agent + "[each.value.node].agent_id}",
				"selectors": "${each.value.selectors}",
			}}
			identity = "${join(\",\", concat([" + agent + "[each.key].agent_id], [for k in each.value.entries : " +
				EntryType + ".unit[k].id]))}"
		} else {
			identity = "${" + agent + "[each.key].agent_id}"
		}
	}
	res[VerdictType] = map[string]any{ResourceName: map[string]any{
		"for_each":       "${local.nodes}",
		"node":           "${each.key}",
		"incus_instance": "${" + InstanceType + "." + ResourceName + "[each.key].name}",
		"incus_project":  "${" + InstanceType + "." + ResourceName + "[each.key].project}",
		// A new deploy (its verdict is new) or a new identity is judged again.
		"deployment": "${sha256(" + ResourceType + "." + ResourceName + "[each.key].verdict)}",
		"identity":   identity,
	}}

	if d := t.DNS; d != nil {
		// Address records first, the others after them: a server may refuse a name
		// that points at an in-zone name without an address (bind9's MX check).
		addresses, records := map[string]any{}, map[string]any{}
		for _, r := range d.RRsets {
			set := records
			if r.Type == "A" || r.Type == "AAAA" {
				set = addresses
			}
			set[escape(r.Key())] = map[string]any{"name": escape(r.Name), "type": escape(r.Type),
				"ttl": r.TTL, "records": escapeAll(r.Records)}
		}
		cfg["locals"].(map[string]any)["address_records"] = addresses
		cfg["locals"].(map[string]any)["records"] = records
		rrsets := map[string]any{}
		for name, set := range map[string]map[string]any{"address": addresses, "record": records} {
			if len(set) == 0 {
				continue
			}
			r := map[string]any{
				"for_each": "${local." + map[string]string{"address": "address_records", "record": "records"}[name] + "}",
				"server":   escape(d.Server),
				"zone":     escape(d.Zone),
				"name":     "${each.value.name}",
				"type":     "${each.value.type}",
				"ttl":      "${each.value.ttl}",
				"records":  "${each.value.records}",
			}
			if name == "record" {
				var after []string
				if len(addresses) > 0 {
					after = append(after, RRsetType+".address")
				}
				if namesANode(d, nodes) {
					// An MX, CNAME or SRV naming a node: the node's own addresses first.
					after = append(after, RRsetType+".node_a", RRsetType+".node_aaaa")
				}
				if len(after) > 0 {
					r["depends_on"] = after
				}
			}
			rrsets[name] = r
		}
		// The addresses are read once the node is deployed (its configuration may
		// give it addresses) and settled; a node without any fails the read rather
		// than publishing nothing. A family it has none of is an absent RRset.
		cfg["data"].(map[string]any)[AddressesType] = map[string]any{ResourceName: map[string]any{
			"for_each":   "${local.nodes}",
			"instance":   "${" + InstanceType + "." + ResourceName + "[each.key].name}",
			"project":    "${" + InstanceType + "." + ResourceName + "[each.key].project}",
			"depends_on": []string{ResourceType + "." + ResourceName},
		}}
		for name, family := range map[string]string{"node_a": "ipv4", "node_aaaa": "ipv6"} {
			typ := "A"
			if family == "ipv6" {
				typ = "AAAA"
			}
			rrsets[name] = map[string]any{
				"for_each": "${local.nodes}",
				"server":   escape(d.Server),
				"zone":     escape(d.Zone),
				"name":     "${each.key}." + escape(d.Domain),
				"type":     typ,
				"ttl":      d.NodeTTL,
				"records":  "${sort(data." + AddressesType + "." + ResourceName + "[each.key]." + family + ")}",
			}
		}
		res[RRsetType] = rrsets
	}
	return nil
}

// namesANode says whether a record of the tree's other RRsets (MX, CNAME, SRV,
// ...) points at a node's own name, <node>.<Domain>, whose A and AAAA records
// switchyard publishes: the target is the record's last field, as in every type
// that names a host.
func namesANode(d *DNS, nodes []Node) bool {
	names := map[string]bool{}
	for _, n := range nodes {
		names[strings.ToLower(n.Name+"."+d.Domain)] = true
	}
	for _, r := range d.RRsets {
		if r.Type == "A" || r.Type == "AAAA" {
			continue
		}
		for _, rec := range r.Records {
			if f := strings.Fields(rec); len(f) > 0 && names[strings.ToLower(f[len(f)-1])] {
				return true
			}
		}
	}
	return false
}

func escapeAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = escape(s)
	}
	return out
}

// TenantNodeAddresses are the addresses of what follows a tenant's node's deploy in
// the graph: the pass after registration (which takes its entries and agent in as
// dependencies) and the node's own records. A subset run targets them beside the
// deployment and the instance.
func TenantNodeAddresses(node string, t *Tenant) []string {
	out := []string{fmt.Sprintf("%s.%s[%q]", VerdictType, ResourceName, node)}
	if t.Spire != nil {
		out = append(out, fmt.Sprintf("%s.%s[%q]", AgentType, ResourceName, node))
	}
	if t.DNS != nil {
		out = append(out, fmt.Sprintf("%s.node_a[%q]", RRsetType, node), fmt.Sprintf("%s.node_aaaa[%q]", RRsetType, node))
	}
	return out
}
