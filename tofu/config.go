package tofu

import (
	"encoding/json"
	"strconv"
)

// The types of main.tf.json (OpenTofu's JSON configuration syntax), which
// LayoutConfig builds. encoding/json writes a struct's fields in their order and a
// map's keys sorted: every struct here lists its fields in the order of their JSON
// names, so the file reads as sorted throughout (the goldens in
// testdata/main.tf.json hold it). Blocks whose names are the tree's (nodes,
// projects, records) are maps. omitempty marks what a configuration may lack;
// omitzero what is there, even empty, once its part of the graph is (a nil map or
// slice is left out, an empty one is written).

// Config is main.tf.json.
type Config struct {
	Check     map[string]Check    `json:"check,omitempty"` // a run over the whole tree only
	Data      Data                `json:"data"`
	Locals    Locals              `json:"locals"`
	Moved     []Moved             `json:"moved,omitempty"`
	Output    map[string]Output   `json:"output"`
	Provider  map[string]struct{} `json:"provider"`
	Resource  *ResourceBlocks     `json:"resource,omitempty"`
	Terraform Terraform           `json:"terraform"`
}

// Check is a check block: its assertions warn, never fail the run.
type Check struct {
	Assert []Assert `json:"assert"`
}

// Assert is one assertion of a check.
type Assert struct {
	Condition    string `json:"condition"`
	ErrorMessage string `json:"error_message"`
}

// Data is the data sources: the self-read (SelfRead) and a tenant's node addresses.
type Data struct {
	Addresses   map[string]AddressesData `json:"switchyard_incus_addresses,omitempty"`
	RemoteState map[string]RemoteState   `json:"terraform_remote_state"`
}

// RemoteState is a terraform_remote_state data source: the configuration's own
// backend, read back.
type RemoteState struct {
	Backend string        `json:"backend"`
	Config  BackendConfig `json:"config"`
}

// BackendConfig is the settings of a backend: the local one's path, or pg's schema
// (its connection string comes from the environment).
type BackendConfig struct {
	Path       *string `json:"path,omitempty"`
	SchemaName string  `json:"schema_name,omitempty"`
}

// AddressesData is switchyard_incus_addresses: a node's addresses as Incus reports them.
type AddressesData struct {
	DependsOn []string `json:"depends_on,omitempty"`
	ForEach   string   `json:"for_each"`
	Instance  string   `json:"instance"`
	Project   string   `json:"project"`
}

// Locals is the local values: the tree's nodes, and a tenant's projects, records
// and registration entries, each keyed by its name.
type Locals struct {
	AddressRecords map[string]RecordLocal  `json:"address_records,omitzero"`
	Entries        map[string]EntryLocal   `json:"entries,omitzero"`
	Nodes          map[string]NodeLocal    `json:"nodes"`
	Projects       map[string]ProjectLocal `json:"projects,omitzero"`
	Records        map[string]RecordLocal  `json:"records,omitzero"`
}

// NodeLocal is a node's entry of local.nodes, the inputs of its resources: an
// SSHNode's or an IncusNode's.
type NodeLocal interface{ nodeLocal() }

// SSHNode is a tf node's inputs; an unset optional one is null, so the provider
// takes its default.
type SSHNode struct {
	Drv            string  `json:"drv"`
	Host           string  `json:"host"`
	HostKey        *string `json:"host_key"`
	KnownHostsFile *string `json:"known_hosts_file"`
	NixosConf      string  `json:"nixos_conf"`
	Port           *int    `json:"port"`
	User           *string `json:"user"`
}

// IncusNode is an Incus node's inputs: its instance's, and a tenant's group and
// registration entries (the keys of local.entries).
type IncusNode struct {
	Config    map[string]string `json:"config"`
	Drv       string            `json:"drv"`
	Entries   []string          `json:"entries,omitzero"`
	Group     string            `json:"group"`
	Image     string            `json:"image"`
	NixosConf string            `json:"nixos_conf"`
	Profiles  []string          `json:"profiles"`
	Project   string            `json:"project"`
	Type      *string           `json:"type"` // null: a container
}

func (*SSHNode) nodeLocal()   {}
func (*IncusNode) nodeLocal() {}

// ProjectLocal is a tenant project's entry of local.projects.
type ProjectLocal struct {
	Config      map[string]string `json:"config"`
	Description string            `json:"description"`
}

// RecordLocal is an RRset's entry of local.address_records or local.records.
type RecordLocal struct {
	Name    string   `json:"name"`
	Records []string `json:"records"`
	TTL     int      `json:"ttl"`
	Type    string   `json:"type"`
}

// EntryLocal is a registration entry's entry of local.entries.
type EntryLocal struct {
	EntryID   string   `json:"entry_id"`
	Node      string   `json:"node"`
	Selectors []string `json:"selectors"`
	SpiffeID  string   `json:"spiffe_id"`
}

// Moved is a moved block: a node's deployment between the shared block and its own.
type Moved struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Output is an output value.
type Output struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// ResourceBlocks is the resource blocks, by type, each type's blocks by name.
type ResourceBlocks struct {
	Deployment map[string]*DeploymentBlock `json:"switchyard_deployment,omitempty"`
	RRset      map[string]*RRsetBlock      `json:"switchyard_dns_rrset,omitempty"`
	Instance   map[string]*InstanceBlock   `json:"switchyard_incus_instance,omitempty"`
	Project    map[string]*ProjectBlock    `json:"switchyard_incus_project,omitempty"`
	Agent      map[string]*AgentBlock      `json:"switchyard_spire_agent,omitempty"`
	Entry      map[string]*EntryBlock      `json:"switchyard_spire_entry,omitempty"`
	Verdict    map[string]*VerdictBlock    `json:"switchyard_verdict,omitempty"`
	Applied    map[string]*AppliedBlock    `json:"terraform_data,omitempty"`
}

// Lifecycle is a resource's lifecycle block.
type Lifecycle struct {
	ReplaceTriggeredBy []string `json:"replace_triggered_by"`
}

// DeploymentBlock is a switchyard_deployment block: an SSH node's (host ...) or an
// Incus node's (incus_instance ...).
type DeploymentBlock struct {
	DeferVerdict   bool       `json:"defer_verdict,omitempty"`
	DependsOn      []string   `json:"depends_on,omitempty"`
	Drv            string     `json:"drv"`
	ForEach        string     `json:"for_each,omitempty"` // "": a block of one node's own
	Host           string     `json:"host,omitempty"`
	HostKey        string     `json:"host_key,omitempty"`
	IncusInstance  string     `json:"incus_instance,omitempty"`
	IncusProject   string     `json:"incus_project,omitempty"`
	KnownHostsFile string     `json:"known_hosts_file,omitempty"`
	Lifecycle      *Lifecycle `json:"lifecycle,omitempty"`
	NixosConf      string     `json:"nixos_conf"`
	Node           string     `json:"node"`
	Port           string     `json:"port,omitempty"`
	User           string     `json:"user,omitempty"`
}

// forNode is a copy of the shared block b for node alone: each.key is the node's
// name and each.value its entry of local.nodes, and it has no for_each.
func (b DeploymentBlock) forNode(node string) *DeploymentBlock {
	q := strconv.Quote(node)
	sub := func(s string) string { return forNodeExpr(s, q) }
	out := b
	out.ForEach = ""
	out.DependsOn = nil
	for _, s := range []*string{&out.Drv, &out.Host, &out.HostKey, &out.IncusInstance, &out.IncusProject,
		&out.KnownHostsFile, &out.NixosConf, &out.Node, &out.Port, &out.User} {
		*s = sub(*s)
	}
	if b.Lifecycle != nil {
		l := Lifecycle{}
		for _, s := range b.Lifecycle.ReplaceTriggeredBy {
			l.ReplaceTriggeredBy = append(l.ReplaceTriggeredBy, sub(s))
		}
		out.Lifecycle = &l
	}
	return &out
}

// InstanceBlock is a switchyard_incus_instance block.
type InstanceBlock struct {
	Config   string `json:"config"`
	ForEach  string `json:"for_each"`
	Image    string `json:"image"`
	Name     string `json:"name"`
	Profiles string `json:"profiles"`
	Project  string `json:"project"`
	Type     string `json:"type"`
}

// ProjectBlock is a switchyard_incus_project block.
type ProjectBlock struct {
	Config      string `json:"config"`
	Description string `json:"description"`
	ForEach     string `json:"for_each"`
	Name        string `json:"name"`
}

// AgentBlock is a switchyard_spire_agent block.
type AgentBlock struct {
	DependsOn     []string   `json:"depends_on"`
	ForEach       string     `json:"for_each"`
	Group         string     `json:"group"`
	IncusInstance string     `json:"incus_instance"`
	IncusProject  string     `json:"incus_project"`
	Lifecycle     *Lifecycle `json:"lifecycle"`
	Node          string     `json:"node"`
	Server        string     `json:"server"`
	TrustDomain   string     `json:"trust_domain"`
}

// EntryBlock is a switchyard_spire_entry block.
type EntryBlock struct {
	EntryID   string `json:"entry_id"`
	ForEach   string `json:"for_each"`
	ParentID  string `json:"parent_id"`
	Selectors string `json:"selectors"`
	Server    string `json:"server"`
	SpiffeID  string `json:"spiffe_id"`
}

// VerdictBlock is a switchyard_verdict block: the pass after registration.
type VerdictBlock struct {
	Deployment    string `json:"deployment"`
	ForEach       string `json:"for_each"`
	Identity      string `json:"identity"`
	IncusInstance string `json:"incus_instance"`
	IncusProject  string `json:"incus_project"`
	Node          string `json:"node"`
}

// RRsetBlock is a switchyard_dns_rrset block.
type RRsetBlock struct {
	DependsOn []string `json:"depends_on,omitempty"`
	ForEach   string   `json:"for_each"`
	Name      string   `json:"name"`
	Records   string   `json:"records"`
	Server    string   `json:"server"`
	TTL       TTL      `json:"ttl"`
	Type      string   `json:"type"`
	Zone      string   `json:"zone"`
}

// TTL is an RRset block's ttl: a number, or an expression (Expr) giving it.
type TTL struct {
	Seconds int
	Expr    string
}

// MarshalJSON writes the expression when there is one, else the number.
func (t TTL) MarshalJSON() ([]byte, error) {
	if t.Expr != "" {
		return json.Marshal(t.Expr)
	}
	return json.Marshal(t.Seconds)
}

// AppliedBlock is the terraform_data block holding the groups' applied submissions.
type AppliedBlock struct {
	Input map[string][]string `json:"input"`
}

// Terraform is the terraform block: the provider requirement and the backend.
type Terraform struct {
	Backend           map[string]BackendConfig       `json:"backend"` // keyed by the backend's kind
	RequiredProviders map[string]ProviderRequirement `json:"required_providers"`
}

// ProviderRequirement is where a provider comes from, and its version.
type ProviderRequirement struct {
	Source  string `json:"source"`
	Version string `json:"version"`
}
