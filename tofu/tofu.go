// Package tofu drives OpenTofu (or Terraform) for the tf methods (SPEC 7): it finds
// the binary (Locate), generates the working directory (Prepare: main.tf.json, built
// from the types of config.go, one switchyard_deployment per node; a CLI
// configuration installing switchyard's own provider from a filesystem mirror that
// links to this binary; the environment OpenTofu runs with, the provider's run
// contract in it), and runs OpenTofu's verbs there through a Session, which owns
// terraform-exec, OpenTofu's output streams and the working directory. It reads back
// what OpenTofu gives: its -json log lines, plans and states. Generation is pure;
// Prepare writes it. The methods keep the verbs' logic, not the driving.
package tofu

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/switchyard-nix/switchyard/provider"
	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/redact"
)

// ResourceType and ResourceName address the deployments: switchyard_deployment.node["<node>"].
const (
	ResourceType = "switchyard_deployment"
	ResourceName = "node"
)

// Node is one node's deployment resource inputs.
type Node struct {
	Name           string
	NixosConf      string
	Drv            string
	Host           string
	Port           int
	User           string
	HostKey        string
	KnownHostsFile string
	// Instance makes it an Incus node (tf-incus): its instance is a resource of the
	// same graph, and the deploy reaches it through the Incus API, not SSH.
	Instance *Instance
	// Group and Entries: a tenant's node (tf-incus-operator, Tenant): its group and
	// the registration entries of its application units.
	Group   string
	Entries []Entry
}

// Instance is an Incus node's instance, switchyard_incus_instance.node["<node>"],
// named as the node.
type Instance struct {
	Project  string
	Image    string
	Profiles []string
	Config   map[string]string
	Type     string // "container" or "virtual-machine"; "" is a container
}

// InstanceType is the resource type of an Incus node's instance.
const InstanceType = "switchyard_incus_instance"

// Backend is where OpenTofu keeps its state.
type Backend struct {
	Kind string // "local" or "pg"
	Path string // local: the state file
}

// escape keeps a value literal in the JSON configuration syntax, where strings are templates.
func escape(s string) string {
	return strings.NewReplacer("${", "$${", "%{", "%%{").Replace(s)
}

// orNull is a pointer to v, nil (null in JSON) for v's zero value: an optional
// input left unset, which the provider gives its default.
func orNull[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// SelfRead is the data source through which the configuration reads its own state
// (the previous run's outputs). It fails on a state that does not exist yet, hence
// Seed before every verb that plans.
const SelfRead = "data.terraform_remote_state.self"

// MainConfig is main.tf.json: the provider requirement, the backend, one deployment
// per node (for_each over local.nodes, keyed by node name), the `deployments` output
// (node to its deployed toplevel, nixos_conf and verdict), and the self-read of the
// previous run's `deployments`. A run over the whole tree also gets a check that
// warns of nodes leaving the state: they are forgotten, never touched. A subset run
// (-target) leaves the other nodes alone, so it has no such check.
func MainConfig(nodes []Node, b Backend, subset bool) ([]byte, error) {
	return TenantConfig(nodes, b, subset, nil)
}

// TenantConfig is MainConfig with a tenant's resources (tf-incus-operator) when
// tenant is not nil; its nodes are Incus nodes.
func TenantConfig(nodes []Node, b Backend, subset bool, tenant *Tenant) ([]byte, error) {
	return LayoutConfig(nodes, b, subset, tenant, Layout{}, nil)
}

// LayoutConfig is TenantConfig with the nodes' deployments placed by layout; a
// tenant's nodes are all in the shared block.
//
// applied, when not nil, is the order submissions were applied to each group (SPEC
// 6.9), kept in the state as the input of AppliedAddress, so that every operator
// machine sharing the state refuses a superseded submission alike.
func LayoutConfig(nodes []Node, b Backend, subset bool, tenant *Tenant, layout Layout, applied map[string][]string) ([]byte, error) {
	cfg, err := layoutConfig(nodes, b, subset, tenant, layout, applied)
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("main.tf.json: %w", err)
	}
	return append(out, '\n'), nil
}

// layoutConfig is LayoutConfig's configuration, before it is encoded.
func layoutConfig(nodes []Node, b Backend, subset bool, tenant *Tenant, layout Layout, applied map[string][]string) (*Config, error) {
	kind, backend, err := backendConfig(b)
	if err != nil {
		return nil, err
	}
	each, instances, err := nodeLocals(nodes)
	if err != nil {
		return nil, err
	}
	cfg := baseConfig(kind, backend, each)
	if len(nodes) > 0 {
		cfg.Resource = &ResourceBlocks{Deployment: map[string]*DeploymentBlock{ResourceName: deploymentBlock(instances)}}
		if instances {
			cfg.Resource.Instance = map[string]*InstanceBlock{ResourceName: instanceBlock()}
		}
		cfg.Output["deployments"] = deploymentsOutput("${{for k, d in " + ResourceType + "." + ResourceName +
			" : k => {toplevel = d.toplevel, nixos_conf = d.nixos_conf, drv = d.drv, ok = d.ok}}}")
	}
	if tenant != nil {
		if !instances && len(nodes) > 0 {
			return nil, fmt.Errorf("a tenant's nodes are Incus nodes")
		}
		if err := addTenant(cfg, nodes, tenant); err != nil {
			return nil, err
		}
		if len(layout.Own) > 0 || len(layout.Steps) > 0 {
			return nil, fmt.Errorf("a tenant's deployments are in one block: no staged rollout")
		}
	}
	layout.place(cfg, nodes, subset)
	if applied != nil {
		addApplied(cfg, applied)
	}
	if !subset {
		cfg.Check = map[string]Check{"nodes_leaving": leavingCheck(instances)}
	}
	return cfg, nil
}

// backendConfig is the backend's kind and settings, for the backend block and the
// self-read alike.
func backendConfig(b Backend) (string, BackendConfig, error) {
	switch b.Kind {
	case "", "local":
		path := escape(b.Path)
		return "local", BackendConfig{Path: &path}, nil
	case "pg":
		// The connection string comes from PG_CONN_STR in OpenTofu's environment:
		// a credential, never written to a file.
		return "pg", BackendConfig{SchemaName: "switchyard"}, nil
	}
	return "", BackendConfig{}, fmt.Errorf("stateBackend %q: not local or pg", b.Kind)
}

// nodeLocals is local.nodes, each node's inputs by its name, and whether the nodes
// are Incus nodes (all of them, or none).
func nodeLocals(nodes []Node) (map[string]NodeLocal, bool, error) {
	each := map[string]NodeLocal{}
	instances := false
	for _, n := range nodes {
		if n.Instance != nil {
			instances = true
			each[escape(n.Name)] = incusNodeLocal(n)
			continue
		}
		each[escape(n.Name)] = &SSHNode{
			NixosConf: escape(n.NixosConf), Drv: escape(n.Drv), Host: escape(n.Host),
			Port: orNull(n.Port), User: orNull(escape(n.User)), HostKey: orNull(escape(n.HostKey)),
			KnownHostsFile: orNull(escape(n.KnownHostsFile)),
		}
	}
	if instances {
		for _, n := range nodes {
			if n.Instance == nil {
				return nil, false, fmt.Errorf("%s: an SSH node among Incus nodes", n.Name)
			}
		}
	}
	return each, instances, nil
}

// incusNodeLocal is an Incus node's inputs (Entries are a tenant's: addTenant).
func incusNodeLocal(n Node) *IncusNode {
	config := map[string]string{}
	for k, v := range n.Instance.Config {
		config[escape(k)] = escape(v)
	}
	return &IncusNode{
		NixosConf: escape(n.NixosConf), Drv: escape(n.Drv),
		Project: escape(n.Instance.Project), Image: escape(n.Instance.Image),
		Profiles: escapeAll(n.Instance.Profiles), Config: config, Type: orNull(escape(n.Instance.Type)),
		Group: escape(n.Group),
	}
}

// baseConfig is what every configuration has: the provider requirement, the
// backend, the nodes' inputs, the self-read and the deployments output (empty
// until there are deployments).
func baseConfig(kind string, backend BackendConfig, each map[string]NodeLocal) *Config {
	return &Config{
		Terraform: Terraform{
			RequiredProviders: map[string]ProviderRequirement{
				"switchyard": {Source: provider.Address, Version: provider.Version},
			},
			Backend: map[string]BackendConfig{kind: backend},
		},
		Provider: map[string]struct{}{"switchyard": {}},
		Locals:   Locals{Nodes: each},
		Data: Data{RemoteState: map[string]RemoteState{
			"self": {Backend: kind, Config: backend},
		}},
		Output: map[string]Output{"deployments": deploymentsOutput("${{}}")},
	}
}

// deploymentsOutput is the `deployments` output with value.
func deploymentsOutput(value string) Output {
	return Output{Description: "node to its deployed toplevel, nixos_conf, derivation and verdict", Value: value}
}

// deploymentBlock is the shared block of the deployments, switchyard_deployment.node,
// for_each over local.nodes: Incus nodes' (instances) or SSH nodes'.
func deploymentBlock(instances bool) *DeploymentBlock {
	// nixos_conf covers every file of the operator tree (plan.NixosConf), so an edit
	// for one node changes every node's. A node whose derivation is the one the last
	// run recorded builds the same system: it keeps its recorded nixos_conf, so
	// OpenTofu leaves it alone instead of updating every node of the fleet. Any other
	// change (a new derivation, a failed verdict, a new host) still updates it.
	nixosConf := "${try(" + SelfRead + ".outputs.deployments[each.key].drv, \"\") == each.value.drv ? try(" +
		SelfRead + ".outputs.deployments[each.key].nixos_conf, each.value.nixos_conf) : each.value.nixos_conf}"
	d := &DeploymentBlock{ForEach: "${local.nodes}", Node: "${each.key}", NixosConf: nixosConf, Drv: "${each.value.drv}"}
	if !instances {
		d.Host, d.Port, d.User = "${each.value.host}", "${each.value.port}", "${each.value.user}"
		d.HostKey, d.KnownHostsFile = "${each.value.host_key}", "${each.value.known_hosts_file}"
		return d
	}
	// The deployment names its instance through the instance resource: it is
	// deployed after the instance exists, and forgotten before it is deleted.
	instance := InstanceType + "." + ResourceName + "[each.key]"
	d.IncusInstance, d.IncusProject = "${"+instance+".name}", "${"+instance+".project}"
	// A replaced instance is deployed again: a new instance runs nothing of the old
	// one's. One changed in place (limits) runs what it ran: its deployment stays.
	d.Lifecycle = &Lifecycle{ReplaceTriggeredBy: []string{instance + ".uuid"}}
	return d
}

// instanceBlock is the Incus nodes' instances, switchyard_incus_instance.node.
func instanceBlock() *InstanceBlock {
	return &InstanceBlock{
		ForEach: "${local.nodes}", Name: "${each.key}", Project: "${each.value.project}",
		Image: "${each.value.image}", Profiles: "${each.value.profiles}",
		Config: "${each.value.config}", Type: "${each.value.type}",
	}
}

// leavingCheck warns of nodes leaving the state (leavingWarning).
func leavingCheck(instances bool) Check {
	leaving := "setsubtract(keys(try(" + SelfRead + ".outputs.deployments, {})), keys(local.nodes))"
	return Check{Assert: []Assert{{
		Condition:    "${length(" + leaving + ") == 0}",
		ErrorMessage: "${format(\"" + leavingWarning(instances) + ": %s\", join(\", \", sort(" + leaving + ")))}",
	}}}
}

// leavingWarning is the plan's warning of nodes that left the tree (removed, or
// disabled): what the apply does to them. A node's Incus instance is a resource of
// the state too (tf-incus), so the apply deletes it; a tf node is only forgotten.
func leavingWarning(instances bool) string {
	if instances {
		return "leaving the tree (the apply deletes their Incus instances and forgets their deployments)"
	}
	return "leaving the state (forgotten; the machines are not touched)"
}

// PluginPath is where the filesystem mirror under pluginsDir holds the provider
// (a symlink to the switchyard binary) for the running platform: OpenTofu looks in
// the <os>_<arch> directory of the platform it runs on, and the provider is this
// very binary, so the two always agree.
func PluginPath(pluginsDir string) string {
	return pluginPathFor(pluginsDir, runtime.GOOS, runtime.GOARCH)
}

// pluginPathFor is PluginPath for a given platform.
func pluginPathFor(pluginsDir, goos, goarch string) string {
	return filepath.Join(pluginsDir, filepath.FromSlash(provider.Address), provider.Version, goos+"_"+goarch,
		"terraform-provider-switchyard_v"+provider.Version)
}

// CLIConfig is the CLI configuration (TF_CLI_CONFIG_FILE): switchyard's provider
// from the filesystem mirror, nothing from a registry, so it works air-gapped.
func CLIConfig(pluginsDir string) string {
	return fmt.Sprintf(`# Generated by switchyard: its own provider comes from this filesystem mirror.
provider_installation {
  filesystem_mirror {
    path    = %s
    include = [%s]
  }
  direct {
    exclude = [%s]
  }
}
`, strconv.Quote(pluginsDir), strconv.Quote(provider.Address), strconv.Quote(provider.Address))
}

// Env is OpenTofu's environment: the given one without BOOTSTRAP, BOOTSTRAP_SEED and
// the variables terraform-exec sets itself, plus the CLI configuration and extra.
func Env(environ []string, cliConfig string, extra map[string]string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "BOOTSTRAP" || k == "BOOTSTRAP_SEED" || k == provider.MagicCookieEnv || k == contract.Env {
			continue
		}
		env[k] = v
	}
	for _, k := range tfexec.ProhibitedEnv(env) {
		delete(env, k)
	}
	env["TF_CLI_CONFIG_FILE"] = cliConfig
	env["CHECKPOINT_DISABLE"] = "1"
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// EnvList is env as KEY=VALUE, sorted.
func EnvList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// StatePath is the local backend's state file under the state dir.
func StatePath(stateDir string) string {
	return filepath.Join(stateDir, "tofu", "state", "switchyard.tfstate")
}

// Workspace is a generated OpenTofu working directory, <state-dir>/tofu.
type Workspace struct {
	Dir       string
	Bin       string
	CLIConfig string // the CLI configuration file
	Env       map[string]string
	Backend   Backend
	// Initialized: the directory was initialised (init) for the same OpenTofu, the
	// same provider binary, backend and CLI configuration, so init can be skipped;
	// see MarkInitialized.
	Initialized bool
	initKey     string
	setup       Setup // what main.tf.json was generated from (Relayout)
}

// Setup is what Prepare generates a working directory from.
type Setup struct {
	StateDir string
	Bin      string // OpenTofu
	Self     string // the switchyard binary, OpenTofu's provider
	Nodes    []Node
	Backend  Backend
	Subset   bool                // the run is -targeted at Nodes, a part of the tree
	Environ  []string            // the environment OpenTofu's is made from (Env)
	Extra    map[string]string   // added to it (OpenTofu's own: the pg backend's PG_CONN_STR)
	Run      contract.Run        // what the provider gets (contract.Env); its Rollout is the Layout's
	Tenant   *Tenant             // tf-incus-operator's resources; nil for the other methods
	Layout   Layout              // where the nodes' deployments are; the zero Layout: the shared block
	Applied  map[string][]string // the groups' applied submissions (LayoutConfig); nil: not kept
}

// Prepare writes the working directory: main.tf.json, the CLI configuration and the
// mirror's link to Self. Unless the directory was initialised for the same binaries,
// backend and CLI configuration (Initialized), the lock file is removed so init
// records the current binary's hash.
//
// The pg backend's connection string (PG_CONN_STR in Extra) is checked first
// (CheckConnString): one OpenTofu's backend init would refuse quoting a part of it
// is refused here, naming pgConnStringFile and the line. It and the key files
// handed to the provider (SSH, Incus client, receipt) go to redact.Default, which
// what OpenTofu prints passes through (Run, LogLine).
func Prepare(s Setup) (*Workspace, error) {
	if s.Backend.Kind == "pg" {
		if err := CheckConnString(s.Extra["PG_CONN_STR"]); err != nil {
			return nil, err
		}
	}
	redact.Default.AddFile(s.Run.KeyFiles()...)
	dir := filepath.Join(s.StateDir, "tofu")
	plugins := filepath.Join(dir, "plugins")
	link := PluginPath(plugins)
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return nil, err
	}
	if cur, err := os.Readlink(link); err != nil || cur != s.Self {
		os.Remove(link)
		if err := os.Symlink(s.Self, link); err != nil {
			return nil, err
		}
	}
	b := s.Backend
	if b.Kind == "" || b.Kind == "local" {
		// Not terraform.tfstate in the working directory: that is the implicit local
		// state, which init would take for another backend and migrate away.
		b = Backend{Kind: "local", Path: StatePath(s.StateDir)}
		if err := os.MkdirAll(filepath.Dir(b.Path), 0o755); err != nil {
			return nil, err
		}
	}
	cliConfig := filepath.Join(dir, "cli.tfrc")
	if err := writeFile(cliConfig, []byte(CLIConfig(plugins))); err != nil {
		return nil, err
	}
	ws := &Workspace{Dir: dir, Bin: s.Bin, CLIConfig: cliConfig, Env: Env(s.Environ, cliConfig, s.Extra), Backend: b, setup: s}
	if err := ws.Relayout(s.Layout); err != nil {
		return nil, err
	}
	ws.initKey = initKey(s, b, CLIConfig(plugins))
	ws.Initialized = ws.initKey != "" && ws.initializedFor(ws.initKey)
	if !ws.Initialized {
		// init records the current provider binary's hash in a new lock file.
		if err := os.Remove(filepath.Join(dir, ".terraform.lock.hcl")); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		if err := os.Remove(filepath.Join(dir, initMark)); err != nil && !os.IsNotExist(err) {
			return nil, err
		}
	}
	return ws, nil
}

// Relayout writes main.tf.json again with the nodes' deployments placed by l, and
// encodes the provider's run (contract.Env) in Env again with l's rollout (a
// Terraform handle made before needs its SetEnv again). Init does not depend on the layout: it can follow
// a first init, once the state tells where the nodes are.
func (w *Workspace) Relayout(l Layout) error {
	w.setup.Layout = l
	main, err := LayoutConfig(w.setup.Nodes, w.Backend, w.setup.Subset, w.setup.Tenant, l, w.setup.Applied)
	if err != nil {
		return err
	}
	w.setup.Run.Rollout = l.Steps // an empty one is left out of the encoding
	run, err := w.setup.Run.Encode()
	if err != nil {
		return err
	}
	w.Env[contract.Env] = run
	return writeFile(filepath.Join(w.Dir, "main.tf.json"), main)
}

// SetApplied writes main.tf.json again keeping applied as the groups' applied
// submissions (LayoutConfig).
func (w *Workspace) SetApplied(applied map[string][]string) error {
	w.setup.Applied = applied
	return w.Relayout(w.setup.Layout)
}

// Layout is where main.tf.json places the nodes' deployments.
func (w *Workspace) Layout() Layout { return w.setup.Layout }

// initMark is the file, in the working directory, holding the key of what the
// directory was last initialised for.
const initMark = ".switchyard-init"

// initKey identifies what `init` depends on: the OpenTofu binary and the provider
// binary (path, size, modification time, inode: a rebuilt switchyard is another
// provider, whose hash the lock file must record), the backend, its connection
// string (hashed, never written) and the CLI configuration. The nodes are not in it:
// a new node needs no init. "" when a binary cannot be read: then init runs.
func initKey(s Setup, b Backend, cliConfig string) string {
	h := sha256.New()
	fmt.Fprintf(h, "switchyard init key 1\n")
	for _, bin := range []string{s.Bin, s.Self} {
		key := binaryKey(bin)
		if key == "" {
			return ""
		}
		fmt.Fprintf(h, "%s\n", key)
	}
	fmt.Fprintf(h, "%s %s %x\n%s", b.Kind, b.Path, sha256.Sum256([]byte(s.Extra["PG_CONN_STR"])), cliConfig)
	return hex.EncodeToString(h.Sum(nil))
}

// initializedFor reports whether the directory was initialised for key, with its
// lock file and provider installation still there.
func (w *Workspace) initializedFor(key string) bool {
	mark, err := os.ReadFile(filepath.Join(w.Dir, initMark))
	if err != nil || strings.TrimSpace(string(mark)) != key {
		return false
	}
	for _, p := range []string{".terraform.lock.hcl", ".terraform"} {
		if _, err := os.Stat(filepath.Join(w.Dir, p)); err != nil {
			return false
		}
	}
	return true
}

// MarkInitialized records that init succeeded for this workspace's OpenTofu,
// provider, backend and CLI configuration: the next Prepare of the same sets
// Initialized.
func (w *Workspace) MarkInitialized() error {
	if w.initKey == "" {
		return nil
	}
	w.Initialized = true
	return writeFile(filepath.Join(w.Dir, initMark), []byte(w.initKey+"\n"))
}

// EmptyState is a state with no resources and no outputs, as written by OpenTofu
// version v, with a fresh lineage.
func EmptyState(v string) ([]byte, error) {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	id[6] = id[6]&0x0f | 0x40 // a random (version 4) UUID, as OpenTofu makes them
	id[8] = id[8]&0x3f | 0x80
	lineage := fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:])
	return json.MarshalIndent(map[string]any{
		"version": 4, "terraform_version": v, "serial": 0, "lineage": lineage,
		"outputs": map[string]any{}, "resources": []any{},
	}, "", "  ")
}

func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// terraform is terraform-exec's handle on the workspace (Session).
func (w *Workspace) terraform() (*tfexec.Terraform, error) {
	tf, err := tfexec.NewTerraform(w.Dir, w.Bin)
	if err != nil {
		return nil, err
	}
	if err := tf.SetEnv(w.Env); err != nil {
		return nil, err
	}
	return tf, nil
}

// Command is a raw OpenTofu command in the workspace (`run -- <args>`).
func (w *Workspace) Command(args ...string) *exec.Cmd {
	cmd := exec.Command(w.Bin, args...)
	cmd.Dir = w.Dir
	cmd.Env = EnvList(w.Env)
	return cmd
}

// Address is the resource address of node's deployment.
func Address(node string) string {
	return fmt.Sprintf("%s.%s[%s]", ResourceType, ResourceName, strconv.Quote(node))
}

// InstanceAddress is the resource address of an Incus node's instance.
func InstanceAddress(node string) string {
	return fmt.Sprintf("%s.%s[%s]", InstanceType, ResourceName, strconv.Quote(node))
}

// addrRE matches the per-node resources of the graph: deployment, instance, and a
// tenant's agent, verdict pass, node records (keyed by node) and entries (keyed by
// "<node>/<application>/<unit>"), data sources too.
var addrRE = regexp.MustCompile(`^(?:data\.)?switchyard_[a-z_]+\.(?:` + ResourceName + `|node_a|node_aaaa|unit)\["((?:[^"\\]|\\.)*)"\]`)

// ownRE matches a deployment in a block of its own (Layout).
var ownRE = regexp.MustCompile(`^` + regexp.QuoteMeta(ResourceType+"."+ResourceName+"_") + `([A-Za-z0-9_-]+)$`)

// NodeOf gives the node a resource address names, its deployment's or its
// instance's ("" when none).
func NodeOf(addr string) string {
	if m := ownRE.FindStringSubmatch(addr); m != nil {
		return m[1]
	}
	m := addrRE.FindStringSubmatch(addr)
	if m == nil {
		return ""
	}
	s, err := strconv.Unquote(`"` + m[1] + `"`)
	if err != nil {
		s = m[1]
	}
	node, _, _ := strings.Cut(s, "/") // an entry's key; node names have no "/"
	return node
}
