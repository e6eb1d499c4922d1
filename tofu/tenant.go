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
func addTenant(cfg *Config, nodes []Node, t *Tenant) error {
	if len(nodes) == 0 {
		// Nothing of a tenant stays without its nodes: an empty graph destroys it all.
		return nil
	}
	if err := addProjects(cfg, nodes, t.Projects); err != nil {
		return err
	}
	cfg.Resource.Deployment[ResourceName].DeferVerdict = true
	identity := "${\"\"}"
	if t.Spire != nil {
		identity = addSpire(cfg, nodes, t.Spire)
	}
	cfg.Resource.Verdict = map[string]*VerdictBlock{ResourceName: {
		ForEach:       "${local.nodes}",
		Node:          "${each.key}",
		IncusInstance: "${" + InstanceType + "." + ResourceName + "[each.key].name}",
		IncusProject:  "${" + InstanceType + "." + ResourceName + "[each.key].project}",
		// A new deploy (its verdict is new) or a new identity is judged again.
		Deployment: "${sha256(" + ResourceType + "." + ResourceName + "[each.key].verdict)}",
		Identity:   identity,
	}}
	if t.DNS != nil {
		addDNS(cfg, nodes, t.DNS)
	}
	return nil
}

// addProjects adds the tenant's projects, in which the nodes' instances are made.
func addProjects(cfg *Config, nodes []Node, projects []Project) error {
	locals := map[string]ProjectLocal{}
	for _, p := range projects {
		config := map[string]string{}
		for k, v := range p.Config {
			config[escape(k)] = escape(v)
		}
		locals[escape(p.Name)] = ProjectLocal{Description: escape(p.Description), Config: config}
	}
	for _, n := range nodes {
		if _, ok := locals[escape(n.Instance.Project)]; !ok {
			return fmt.Errorf("%s: project %q is not a tenant's", n.Name, n.Instance.Project)
		}
	}
	cfg.Locals.Projects = locals
	if len(locals) > 0 {
		cfg.Resource.Project = map[string]*ProjectBlock{"tenant": {
			ForEach:     "${local.projects}",
			Name:        "${each.key}",
			Description: "${each.value.description}",
			Config:      "${each.value.config}",
		}}
		// The instance is made in its project, after it, and deleted before it.
		cfg.Resource.Instance[ResourceName].Project = "${" + ProjectType + ".tenant[each.value.project].name}"
	}
	return nil
}

// addSpire adds each node's agent and its units' registration entries, and gives
// the identity expression the pass after registration is judged again on.
func addSpire(cfg *Config, nodes []Node, s *Spire) (identity string) {
	instance := InstanceType + "." + ResourceName + "[each.key]"
	agent := AgentType + "." + ResourceName
	cfg.Resource.Agent = map[string]*AgentBlock{ResourceName: {
		ForEach:       "${local.nodes}",
		Server:        escape(s.Server),
		TrustDomain:   escape(s.TrustDomain),
		Group:         "${each.value.group}",
		Node:          "${each.key}",
		IncusInstance: "${" + instance + ".name}",
		IncusProject:  "${" + instance + ".project}",
		// A new instance holds no token: it gets a new one. Only a new one: an
		// instance changed in place (limits) keeps its agent and token.
		Lifecycle: &Lifecycle{ReplaceTriggeredBy: []string{instance + ".uuid"}},
		// The identity is given to a deployed node: what waits for it there (the
		// agent's path unit, units failing without it) is judged by the pass
		// after registration, and a node whose deploy failed gets none.
		DependsOn: []string{ResourceType + "." + ResourceName},
	}}
	entries := entryLocals(cfg, nodes)
	cfg.Locals.Entries = entries
	if len(entries) == 0 {
		return "${" + agent + "[each.key].agent_id}"
	}
	cfg.Resource.Entry = map[string]*EntryBlock{"unit": {
		ForEach:   "${local.entries}",
		Server:    escape(s.Server),
		EntryID:   "${each.value.entry_id}",
		SpiffeID:  "${each.value.spiffe_id}",
		ParentID:  "${" + agent + "[each.value.node].agent_id}",
		Selectors: "${each.value.selectors}",
	}}
	return "${join(\",\", concat([" + agent + "[each.key].agent_id], [for k in each.value.entries : " +
		EntryType + ".unit[k].id]))}"
}

// entryLocals is local.entries, the nodes' registration entries by key; each node's
// entry of local.nodes gets its entries' keys, sorted.
func entryLocals(cfg *Config, nodes []Node) map[string]EntryLocal {
	entries := map[string]EntryLocal{}
	for _, n := range nodes {
		keys := []string{}
		for _, e := range n.Entries {
			entries[escape(e.Key)] = EntryLocal{Node: escape(n.Name), EntryID: escape(e.ID),
				SpiffeID: escape(e.SpiffeID), Selectors: escapeAll(e.Selectors)}
			keys = append(keys, escape(e.Key))
		}
		sort.Strings(keys)
		cfg.Locals.Nodes[escape(n.Name)].(*IncusNode).Entries = keys
	}
	return entries
}

// addDNS adds the tree's RRsets and each node's own A and AAAA records.
func addDNS(cfg *Config, nodes []Node, d *DNS) {
	// Address records first, the others after them: a server may refuse a name
	// that points at an in-zone name without an address (bind9's MX check).
	addresses, records := map[string]RecordLocal{}, map[string]RecordLocal{}
	for _, r := range d.RRsets {
		set := records
		if r.Type == "A" || r.Type == "AAAA" {
			set = addresses
		}
		set[escape(r.Key())] = RecordLocal{Name: escape(r.Name), Type: escape(r.Type), TTL: r.TTL, Records: escapeAll(r.Records)}
	}
	cfg.Locals.AddressRecords, cfg.Locals.Records = addresses, records
	rrsets := map[string]*RRsetBlock{}
	if len(addresses) > 0 {
		rrsets["address"] = treeRRsets(d, "address_records")
	}
	if len(records) > 0 {
		r := treeRRsets(d, "records")
		if len(addresses) > 0 {
			r.DependsOn = append(r.DependsOn, RRsetType+".address")
		}
		if namesANode(d, nodes) {
			// An MX, CNAME or SRV naming a node: the node's own addresses first.
			r.DependsOn = append(r.DependsOn, RRsetType+".node_a", RRsetType+".node_aaaa")
		}
		rrsets["record"] = r
	}
	// The addresses are read once the node is deployed (its configuration may give
	// it addresses) and settled; a node without any fails the read rather than
	// publishing nothing. A family it has none of is an absent RRset.
	cfg.Data.Addresses = map[string]AddressesData{ResourceName: {
		ForEach:   "${local.nodes}",
		Instance:  "${" + InstanceType + "." + ResourceName + "[each.key].name}",
		Project:   "${" + InstanceType + "." + ResourceName + "[each.key].project}",
		DependsOn: []string{ResourceType + "." + ResourceName},
	}}
	rrsets["node_a"] = nodeRRsets(d, "A", "ipv4")
	rrsets["node_aaaa"] = nodeRRsets(d, "AAAA", "ipv6")
	cfg.Resource.RRset = rrsets
}

// treeRRsets is the block of the tree's RRsets of local.<set>.
func treeRRsets(d *DNS, set string) *RRsetBlock {
	return &RRsetBlock{
		ForEach: "${local." + set + "}",
		Server:  escape(d.Server),
		Zone:    escape(d.Zone),
		Name:    "${each.value.name}",
		Type:    "${each.value.type}",
		TTL:     TTL{Expr: "${each.value.ttl}"},
		Records: "${each.value.records}",
	}
}

// nodeRRsets is the block of the nodes' own records of type typ, <node>.<Domain>,
// their addresses of family as Incus reports them.
func nodeRRsets(d *DNS, typ, family string) *RRsetBlock {
	return &RRsetBlock{
		ForEach: "${local.nodes}",
		Server:  escape(d.Server),
		Zone:    escape(d.Zone),
		Name:    "${each.key}." + escape(d.Domain),
		Type:    typ,
		TTL:     TTL{Seconds: d.NodeTTL},
		Records: "${sort(data." + AddressesType + "." + ResourceName + "[each.key]." + family + ")}",
	}
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
