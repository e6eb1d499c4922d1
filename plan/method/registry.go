package method

import (
	"github.com/switchyard-nix/switchyard/plan/coordinates"
)

// Transports a method reaches its nodes with; a node's settings for it go into its plan.
const (
	SSH   = "ssh"
	Incus = "incus"
)

var (
	common = []Setting{
		integer("parallel", 8, 1, "nodes deployed at once (the --parallel flag overrides it)"),
	}
	overSSH = []Setting{
		credential("sshKeyFile", "private key file for SSH to the nodes, besides the ssh agent"),
		anchor(str("knownHostsFile", "", "known_hosts file checked for a node that pins no hostKey; empty: ~/.ssh/known_hosts")),
	}
	staged = []Setting{
		str("rollout", "", `apply's stages, "canary=N,batch=M" (M a count or a percentage, "25%"): `+
			"each stage must pass its verdicts before the next starts (the --rollout flag overrides it); empty: every node at once"),
	}
	tofu = []Setting{
		anchor(enum("stateBackend", "local", `where OpenTofu keeps its state: "local" (under the state dir) or "pg" (PostgreSQL, with locking)`, "local", "pg")),
		credential("pgConnStringFile", `file holding the PostgreSQL connection string, for stateBackend "pg"`),
	}
	overIncus = []Setting{
		anchor(str("project", "default", "Incus project of the instances")),
	}
	incusRemote = []Setting{
		anchor(str("incusRemote", "", "Incus remote of the client configuration (~/.config/incus/config.yml); empty: the local unix socket")),
		credential("incusClientKeyFile", "client key for an HTTPS Incus remote, when not the client configuration's"),
	}
	operator = []Setting{
		anchor(str("project", "", "the tenant's Incus project, created and destroyed with it; empty: the group's name")),
		str("projectDescription", "", "description of the tenant's Incus project; empty: one naming the group"),
		anchor(object("projectConfig", "configuration of the tenant's Incus project (limits.*, restricted.*, features.*): "+
			"string values, over the defaults features.images=true and features.profiles=false (the host's profiles)")),
		anchor(str("dnsServer", "", "DNS server (host:port) accepting RFC 2136 updates for the tenant domain")),
		credential("dnsTsigKeyFile", "TSIG key file (BIND key format) signing the DNS updates"),
		anchor(str("spireServer", "", "SPIRE server address for workload-identity registration")),
		anchor(str("spireTrustDomain", "", "SPIFFE trust domain; empty: the tenant domain")),
		credential("spireTokenFile", "file holding the SPIRE registration token"),
	}

	hostingEnv = coordinates.Coordinate{Name: "HOSTING_ENV", Default: "production",
		Description: "the hosting environment the plans describe (production, staging, ...)"}
	dnsDomain = coordinates.Coordinate{Name: "DNS_DOMAIN", Default: "",
		Description: "parent DNS zone tenant domains are registered under; empty: the tenant domain is its own zone"}
)

func join(groups ...[]Setting) []Setting {
	var out []Setting
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

var registry = []Method{
	{Name: "ssh", Summary: "deploy over SSH to machines that exist; no state (receipts only)",
		Transport: SSH, Settings: join(common, overSSH, staged), Coordinates: []coordinates.Coordinate{hostingEnv},
		Runner: RunnerSSH, Verbs: sshVerbs},
	{Name: "tf", Summary: "deploy over SSH inside an OpenTofu graph whose state holds one resource per node",
		Transport: SSH, Settings: join(common, overSSH, tofu, staged), Coordinates: []coordinates.Coordinate{hostingEnv},
		Runner: RunnerTofu, Verbs: tofuVerbs},
	{Name: "tf-incus", Summary: "make each node's Incus instance and deploy it through the Incus API, in OpenTofu state",
		Transport: Incus, Settings: join(common, tofu, overIncus, incusRemote, staged), Coordinates: []coordinates.Coordinate{hostingEnv},
		Runner: RunnerTofu, Verbs: tofuVerbs},
	{Name: "tf-incus-operator", Summary: "tf-incus plus a tenant's Incus project, DNS records and workload identities",
		Transport: Incus, Settings: join(common, tofu, incusRemote, operator),
		Coordinates: []coordinates.Coordinate{hostingEnv, dnsDomain}, TenantsOnly: true,
		Runner: RunnerTofu, Verbs: tofuVerbs},
}
