package methods

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/dnsupdate"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/spire"
	"github.com/switchyard-nix/switchyard/tofu"
)

// projectDefaults is a tenant project's configuration under the tree's projectConfig:
// its own images (the node images are cached in it, and removed with it) and the
// host's profiles (the tree's `incus.profiles` name them; a project's own profiles
// start empty, without a root disk).
var projectDefaults = map[string]string{"features.images": "true", "features.profiles": "false"}

// tenantProject is the Incus project of a tenant's group: the project setting, or
// the group's name.
func tenantProject(s merge.Settings, group string) string {
	if p := s.Project; p != "" {
		return p
	}
	return group
}

// setting is a refusal naming a method setting.
func setting(name, format string, args ...any) error {
	return &field.Error{Source: "setting " + name, Reason: fmt.Sprintf(format, args...)}
}

// tenant is what tf-incus-operator adds to the graph of nodes (SPEC 7.1); the
// credentials the provider gets for it go into run. Every input is checked here, so
// a bad one is refused (exit 2) before anything runs.
func tenantOf(d *merge.Deployment, nodes []tofu.Node, coords map[string]string, run *contract.Run) (*tofu.Tenant, error) {
	t := &tofu.Tenant{}
	s := d.Typed()
	domain := canonicalDomain(d.Domain)
	if domain == "" {
		return nil, &field.Error{Source: "DEPLOYMENT", Path: field.Path("").Key("domain"),
			Reason: "tf-incus-operator needs the tenant domain"}
	}
	// Projects: one per tenant group.
	config := map[string]string{}
	for k, v := range projectDefaults {
		config[k] = v
	}
	for k, v := range s.ProjectConfig {
		str, ok := v.(string)
		if !ok {
			return nil, setting("projectConfig", "key %s: wrong type: %T, want a string (Incus configuration values are strings)", k, v)
		}
		config[k] = str
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		p := n.Instance.Project
		if seen[p] {
			continue
		}
		seen[p] = true
		desc := s.ProjectDescription
		if desc == "" {
			desc = "switchyard tenant " + n.Group + " (" + domain + ")"
		}
		t.Projects = append(t.Projects, tofu.Project{Name: p, Description: desc, Config: config})
	}

	if err := tenantDNS(d, s, t, nodes, domain, coords, run); err != nil {
		return nil, err
	}
	if err := tenantSpire(d, s, t, nodes, domain); err != nil {
		return nil, err
	}
	return t, nil
}

// tenantDNS is the tenant domain's records: the tree's dns.records and each node's
// addresses, in the zone DNS_DOMAIN (else the domain itself).
func tenantDNS(d *merge.Deployment, s merge.Settings, t *tofu.Tenant, nodes []tofu.Node, domain string, coords map[string]string, run *contract.Run) error {
	records := d.Definition.DNS.Records
	server := s.DNSServer
	if server == "" {
		if len(records) > 0 {
			return setting("dnsServer", "the tree has dns.records, but no DNS server to send them to")
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(server); err != nil {
		return setting("dnsServer", "%q is not host:port", server)
	}
	keyFile := s.DNSTsigKeyFile
	if keyFile == "" {
		return setting("dnsTsigKeyFile", "the DNS updates to %s need a TSIG key file", server)
	}
	if _, err := dnsupdate.ReadKeyFile(keyFile); err != nil {
		return setting("dnsTsigKeyFile", "%v", err)
	}
	run.DNSKeyFile = keyFile
	fqdn := dnsupdate.CanonicalName(domain)
	zone := fqdn
	if z := coords["DNS_DOMAIN"]; z != "" {
		zone = dnsupdate.CanonicalName(z)
		if zone != fqdn && !strings.HasSuffix(fqdn, "."+zone) {
			return &field.Error{Source: "DNS_DOMAIN", Reason: fmt.Sprintf("the tenant domain %s is not in the zone %s", domain, strings.TrimSuffix(zone, "."))}
		}
	}
	nodeNames := map[string]bool{}
	for _, n := range nodes {
		nodeNames[n.Name] = true
	}
	at := field.Path("").Key("dns").Key("records")
	var rrsets []tofu.RRset
	for _, name := range slices.Sorted(maps.Keys(records)) {
		r := records[name]
		owner := fqdn
		if name != "@" {
			owner = dnsupdate.CanonicalName(name + "." + domain)
		}
		for _, typ := range definition.RecordTypes {
			values, ok := r.Sets[typ]
			if !ok {
				continue
			}
			if (typ == "A" || typ == "AAAA") && nodeNames[strings.ToLower(name)] {
				return &field.Error{Source: d.Definition.Source, Path: at.Key(name).Key(typ),
					Reason: fmt.Sprintf("%s is node %s's name: its %s records are its addresses as Incus reports them", name, name, typ)}
			}
			if typ == "CNAME" && nodeNames[strings.ToLower(name)] {
				// The server would ignore the CNAME, or the node's addresses after it
				// (RFC 2136 3.4.2.2): a CNAME is a name's only record.
				return &field.Error{Source: d.Definition.Source, Path: at.Key(name).Key(typ),
					Reason: fmt.Sprintf("%s is node %s's name, which holds its addresses: a CNAME is a name's only record", name, name)}
			}
			set := tofu.RRset{Name: owner, Type: typ, TTL: int(r.TTL)}
			for i, v := range values {
				c, err := dnsupdate.Canonical(typ, v, fqdn)
				if err != nil {
					return &field.Error{Source: d.Definition.Source, Path: at.Key(name).Key(typ).Index(i), Reason: err.Error()}
				}
				if !slices.Contains(set.Records, c) {
					set.Records = append(set.Records, c)
				}
			}
			sort.Strings(set.Records)
			rrsets = append(rrsets, set)
		}
	}
	t.DNS = &tofu.DNS{Server: server, Zone: zone, RRsets: rrsets, Domain: fqdn, NodeTTL: definition.DefaultTTL}
	return nil
}

// tenantSpire is each node's workload identity: an entry per unit of every enabled
// application of its group, parented by the node's agent.
func tenantSpire(d *merge.Deployment, s merge.Settings, t *tofu.Tenant, nodes []tofu.Node, domain string) error {
	server := s.SpireServer
	if server == "" {
		return nil
	}
	if !strings.HasPrefix(server, "unix://") {
		return setting("spireServer", "%q: give the SPIRE server API's unix socket as unix:///path (a host:port server needs an admin SVID, which switchyard does not fetch yet)", server)
	}
	td := s.SpireTrustDomain
	if td == "" {
		td = domain
	}
	t.Spire = &tofu.Spire{Server: server, TrustDomain: td}
	for i := range nodes {
		n := &nodes[i]
		n.Entries = nil
		for _, app := range d.Definition.Groups[n.Group].Applications {
			a := d.Applications[app]
			if !a.Enable {
				continue
			}
			for _, unit := range a.Units {
				n.Entries = append(n.Entries, tofu.Entry{
					Key:       n.Name + "/" + app + "/" + unit,
					ID:        spire.EntryID(n.Group, n.Name, app, unit),
					SpiffeID:  spire.WorkloadID(td, n.Group, n.Name, app),
					Selectors: []string{"systemd:id:" + unit},
				})
			}
		}
	}
	return nil
}

// tenantPreflight proves, before OpenTofu changes anything, that the DNS server
// takes the TSIG key for the zone and that the SPIRE server answers: a wrong key then
// fails the run (exit 3, with the server's answer) with nothing changed.
func tenantPreflight(ctx context.Context, t *tofu.Tenant, run contract.Run) error {
	if t.DNS != nil {
		key, err := dnsupdate.ReadKeyFile(run.DNSKeyFile)
		if err != nil {
			return fmt.Errorf("dnsTsigKeyFile: %w", err)
		}
		c := &dnsupdate.Client{Server: t.DNS.Server, Key: key}
		if err := c.Check(ctx, t.DNS.Zone); err != nil {
			return fmt.Errorf("DNS zone %s: %w", strings.TrimSuffix(t.DNS.Zone, "."), err)
		}
	}
	if t.Spire != nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := spire.Dial(ctx, t.Spire.Server)
		if err != nil {
			return fmt.Errorf("SPIRE server: %w", err)
		}
		defer c.Close()
		if err := c.Healthy(ctx); err != nil {
			return fmt.Errorf("SPIRE server: %w", err)
		}
	}
	return nil
}
