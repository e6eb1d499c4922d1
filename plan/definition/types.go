package definition

import (
	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/tree"
)

// NixOS is the `system` that builds nodes with nixpkgs' NixOS.
const NixOS = "nixos"

// Definition is a loaded deployment definition: the baked configuration.
type Definition struct {
	Tree   *tree.Tree
	Source string // "deployment.nix" or "deployment.json"

	Domain string
	Email  string
	// System is "nixos", or Builder names the tree's builder { configuration, plan }: toplevel.
	Builder data.RepoPath
	Nixpkgs string // a path to nixpkgs (used when Builder is empty); may be empty

	Applications map[string]Application
	Groups       map[string]Group
	// DNS is the tenant domain's records (dns.records), written by tf-incus-operator.
	DNS DNS
	// MethodSettings is deployment-method.<method>: the baked settings of each method,
	// checked against the method's declared settings.
	MethodSettings map[string]map[string]any
	// Submissions is who may sign a DEPLOYMENT (SPEC 6.8).
	Submissions Submissions
}

// Submissions is the definition's `submissions`: signed DEPLOYMENTs (SPEC 6.8).
type Submissions struct {
	// AllowedSigners is the tree's OpenSSH allowed_signers file; "": none, and a
	// signed submission is refused.
	AllowedSigners data.RepoPath
	// RequireSignature refuses an unsigned submission before any evaluation.
	RequireSignature bool
	// CredentialDirs is submissions.credentialDirs: absolute directories under which a
	// submission may name a credential file (SPEC 6.9), besides the deployer's
	// SWITCHYARD_CREDENTIAL_DIRS and $CREDENTIALS_DIRECTORY.
	CredentialDirs []string
	// Scopes is submissions.scopes: a signer's principal to the groups its submissions
	// may be applied to (SPEC 6.9); nil: every signer may reach every group.
	Scopes map[string][]string
}

// System is the deployment's `system` as written: "nixos" or the builder's tree path.
func (d *Definition) System() string {
	if d.Builder == "" {
		return NixOS
	}
	return string(d.Builder)
}

// Application is one application of the definition.
type Application struct {
	Enable   bool
	Module   data.RepoPath  // empty: the application has no module of its own
	Settings map[string]any // data; never nil
	// Units are the systemd units the application runs (default: "<name>.service"):
	// each gets a workload identity in tf-incus-operator (SPEC 7.1).
	Units []string
}

// DNS is the deployment's `dns`.
type DNS struct {
	// Records is dns.records: a name relative to the domain ("@" for the apex) to its
	// RRsets.
	Records map[string]Record
}

// Record is the RRsets of one name: record type (RecordTypes) to its values as the
// tree writes them, with one TTL for all of them.
type Record struct {
	Sets map[string][]string
	TTL  int64
}

// RecordTypes are the record types dns.records takes.
var RecordTypes = []string{"A", "AAAA", "CNAME", "MX", "TXT"}

// DefaultTTL is a record's TTL when the tree gives none.
const DefaultTTL = 300

// RunsApplications tells whether the group runs an application: only such a group
// is a tenant of tf-incus-operator (SPEC 7.1).
func (g Group) RunsApplications() bool { return len(g.Applications) > 0 }

// Group is a group of nodes and the applications they run.
type Group struct {
	Applications []string // names of defined applications
	// Domains is the domains a submission for the group may set as `domain`, each
	// with its subdomains (SPEC 6.9); empty: the baked domain only.
	Domains []string
	Nodes   map[string]Node
}

// Node is one node of a group.
type Node struct {
	Enable  bool // default true; a disabled node is neither planned nor listed
	Modules []data.RepoPath
	Tags    []string // what --on's @tag selects by; the tree's only, never a submission's
	// SubstituteOnNode (default true) lets the node fetch the paths it lacks from
	// the binary caches of its own Nix configuration before the deployer streams
	// the rest. The tree's only: a submission sets nothing of a node.
	SubstituteOnNode bool
	SSH              *SSH   // the ssh transport's settings (methods ssh, tf)
	Incus            *Incus // the incus transport's settings (methods tf-incus, tf-incus-operator)
}

// SSH is how the ssh transport reaches a node.
type SSH struct {
	Host    string
	Port    int64  // default 22
	User    string // default "root"
	HostKey string // a pinned host key, authorized_keys format; empty: known_hosts
}

// Incus is the instance the incus methods make for a node.
type Incus struct {
	Image    string
	Profiles []string // default ["default"]
	Limits   Limits
	// Type is the instance's type, as the Incus API names it: InstanceContainer
	// (the default) or InstanceVM. It decides which nixpkgs module makes the node's
	// configuration an instance of that kind (plan.Configuration).
	Type string
}

// Instance types of the Incus API (an instance's "type").
const (
	InstanceContainer = "container"
	InstanceVM        = "virtual-machine"
)

// VM tells whether the instance is a virtual machine.
func (i *Incus) VM() bool { return i.Type == InstanceVM }

// Limits are an instance's resource limits; zero values are unset.
type Limits struct {
	CPU    int64
	Memory string
}

// Data is the SSH settings as plan data.
func (s *SSH) Data() map[string]any {
	m := map[string]any{"host": s.Host, "port": s.Port, "user": s.User}
	if s.HostKey != "" {
		m["hostKey"] = s.HostKey
	}
	return m
}

// Data is the Incus settings as plan data.
func (i *Incus) Data() map[string]any {
	profiles := make([]any, len(i.Profiles))
	for k, p := range i.Profiles {
		profiles[k] = p
	}
	typ := i.Type
	if typ == "" {
		typ = InstanceContainer
	}
	m := map[string]any{"image": i.Image, "profiles": profiles, "type": typ}
	limits := map[string]any{}
	if i.Limits.CPU != 0 {
		limits["cpu"] = i.Limits.CPU
	}
	if i.Limits.Memory != "" {
		limits["memory"] = i.Limits.Memory
	}
	if len(limits) > 0 {
		m["limits"] = limits
	}
	return m
}
