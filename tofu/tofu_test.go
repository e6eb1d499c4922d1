package tofu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/switchyard-nix/switchyard/provider/contract"
)

func TestMainConfig(t *testing.T) {
	b, err := MainConfig([]Node{
		{Name: "web1", NixosConf: "c1", Drv: "/nix/store/a.drv", Host: "127.0.0.1", Port: 2222, HostKey: "ssh-ed25519 AAAA"},
		{Name: "web2", NixosConf: "c2", Drv: "/nix/store/b.drv", Host: "h${x}"},
	}, Backend{Path: "/s/terraform.tfstate"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Terraform struct {
			RequiredProviders map[string]map[string]string `json:"required_providers"`
			Backend           map[string]map[string]string `json:"backend"`
		}
		Resource map[string]map[string]map[string]any
		Locals   map[string]map[string]any
		Data     map[string]map[string]map[string]any
		Check    map[string]any
		Output   map[string]map[string]any
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Terraform.RequiredProviders["switchyard"]["source"] != "registry.opentofu.org/switchyard-nix/switchyard" {
		t.Errorf("provider: %v", cfg.Terraform.RequiredProviders)
	}
	if cfg.Terraform.Backend["local"]["path"] != "/s/terraform.tfstate" {
		t.Errorf("backend: %v", cfg.Terraform.Backend)
	}
	r := cfg.Resource["switchyard_deployment"]["node"]
	each := cfg.Locals["nodes"]
	if r["for_each"] != "${local.nodes}" {
		t.Errorf("for_each: %v", r["for_each"])
	}
	w1 := each["web1"].(map[string]any)
	if w1["nixos_conf"] != "c1" || w1["port"] != 2222.0 || w1["user"] != nil || w1["drv"] != "/nix/store/a.drv" {
		t.Errorf("web1: %v", w1)
	}
	if each["web2"].(map[string]any)["host"] != "h$${x}" {
		t.Errorf("template not escaped: %v", each["web2"])
	}
	// A node whose derivation is the recorded one keeps its recorded nixos_conf.
	if want := "${try(data.terraform_remote_state.self.outputs.deployments[each.key].drv, \"\") == each.value.drv ? " +
		"try(data.terraform_remote_state.self.outputs.deployments[each.key].nixos_conf, each.value.nixos_conf) : each.value.nixos_conf}"; r["nixos_conf"] != want || r["node"] != "${each.key}" {
		t.Errorf("resource: %v", r)
	}
	// The self-read reads the very backend the state is in.
	self := cfg.Data["terraform_remote_state"]["self"]
	if self["backend"] != "local" || self["config"].(map[string]any)["path"] != "/s/terraform.tfstate" {
		t.Errorf("self-read: %v", self)
	}
	if cfg.Check["nodes_leaving"] == nil || !strings.Contains(cfg.Output["deployments"]["value"].(string), "switchyard_deployment.node") {
		t.Errorf("check %v, output %v", cfg.Check, cfg.Output)
	}
	sub, _ := MainConfig(nil, Backend{Path: "/s"}, true)
	if strings.Contains(string(sub), "nodes_leaving") {
		t.Errorf("a subset run warns of nodes leaving: %s", sub)
	}
	pg, err := MainConfig(nil, Backend{Kind: "pg"}, false)
	if err != nil || strings.Contains(string(pg), "conn_str") || strings.Count(string(pg), `"pg"`) != 2 || strings.Contains(string(pg), `"resource"`) {
		t.Errorf("pg: %v %s", err, pg)
	}
	if _, err := MainConfig(nil, Backend{Kind: "s3"}, false); err == nil {
		t.Error("unknown backend accepted")
	}
}

func TestCLIConfigAndPluginPath(t *testing.T) {
	c := CLIConfig("/st/tofu/plugins")
	for _, want := range []string{`path    = "/st/tofu/plugins"`, `include = ["registry.opentofu.org/switchyard-nix/switchyard"]`, "filesystem_mirror"} {
		if !strings.Contains(c, want) {
			t.Errorf("CLI config lacks %q:\n%s", want, c)
		}
	}
	for _, c := range []struct{ goos, goarch, want string }{
		{"linux", "amd64", "/p/registry.opentofu.org/switchyard-nix/switchyard/0.1.0/linux_amd64/terraform-provider-switchyard_v0.1.0"},
		{"linux", "arm64", "/p/registry.opentofu.org/switchyard-nix/switchyard/0.1.0/linux_arm64/terraform-provider-switchyard_v0.1.0"},
		{"darwin", "arm64", "/p/registry.opentofu.org/switchyard-nix/switchyard/0.1.0/darwin_arm64/terraform-provider-switchyard_v0.1.0"},
	} {
		if p := pluginPathFor("/p", c.goos, c.goarch); p != c.want {
			t.Errorf("plugin path for %s/%s = %s, want %s", c.goos, c.goarch, p, c.want)
		}
	}
	// The running platform's directory: the one OpenTofu on this machine looks in.
	if p, want := PluginPath("/p"), pluginPathFor("/p", runtime.GOOS, runtime.GOARCH); p != want {
		t.Errorf("PluginPath = %s, want %s", p, want)
	}
}

func TestEnv(t *testing.T) {
	env := Env([]string{"PATH=/bin", "BOOTSTRAP=1", "BOOTSTRAP_SEED=x", "TF_LOG=TRACE", "TF_PLUGIN_MAGIC_COOKIE=c", "DEPLOY_STRICT_UNITS=0"},
		"/c.tfrc", map[string]string{"SWITCHYARD_SSH_KEY_FILE": "/k"})
	for _, gone := range []string{"BOOTSTRAP", "BOOTSTRAP_SEED", "TF_LOG", "TF_PLUGIN_MAGIC_COOKIE"} {
		if _, ok := env[gone]; ok {
			t.Errorf("%s kept", gone)
		}
	}
	if env["PATH"] != "/bin" || env["DEPLOY_STRICT_UNITS"] != "0" || env["TF_CLI_CONFIG_FILE"] != "/c.tfrc" || env["SWITCHYARD_SSH_KEY_FILE"] != "/k" {
		t.Errorf("env %v", env)
	}
}

func TestEmptyState(t *testing.T) {
	a, _ := EmptyState("1.10.6")
	b, _ := EmptyState("1.10.6")
	var s struct {
		Version   int
		Serial    int
		Lineage   string
		Resources []any
		Outputs   map[string]any
		TFVersion string `json:"terraform_version"`
	}
	if err := json.Unmarshal(a, &s); err != nil {
		t.Fatal(err)
	}
	if s.Version != 4 || s.Serial != 0 || s.TFVersion != "1.10.6" || len(s.Resources) != 0 || s.Outputs == nil ||
		!regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(s.Lineage) {
		t.Errorf("empty state: %s", a)
	}
	if string(a) == string(b) {
		t.Error("two empty states share a lineage")
	}
}

func TestAddress(t *testing.T) {
	if a := Address("web1"); a != `switchyard_deployment.node["web1"]` || NodeOf(a) != "web1" {
		t.Errorf("Address: %s", a)
	}
}

func TestNodeOf(t *testing.T) {
	for addr, want := range map[string]string{
		`switchyard_deployment.node["web1"]`:     "web1",
		`switchyard_deployment.node["a\"b"]`:     `a"b`,
		`terraform_data.x`:                       "",
		`switchyard_deployment.node["web2"].x`:   "web2",
		`switchyard_incus_instance.node["web3"]`: "web3",
	} {
		if got := NodeOf(addr); got != want {
			t.Errorf("NodeOf(%s) = %q, want %q", addr, got, want)
		}
	}
}

func TestPrepare(t *testing.T) {
	state := t.TempDir()
	self, _ := os.Executable()
	w, err := Prepare(Setup{StateDir: state, Bin: "/bin/tofu", Self: self,
		Nodes: []Node{{Name: "web1", NixosConf: "c", Drv: "d", Host: "h"}}, Environ: []string{"BOOTSTRAP=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(PluginPath(filepath.Join(state, "tofu", "plugins"))); got != self {
		t.Errorf("plugin link -> %q", got)
	}
	main, _ := os.ReadFile(filepath.Join(w.Dir, "main.tf.json"))
	if !strings.Contains(string(main), StatePath(state)) {
		t.Errorf("main.tf.json: %s", main)
	}
	if _, ok := w.Env["BOOTSTRAP"]; ok {
		t.Error("BOOTSTRAP kept")
	}
	// The provider's run is one variable, the contract's, whatever the environment
	// held; a layout's rollout is in it until the next Relayout.
	steps := map[string]contract.Step{"web3": {Stage: "batch 1", After: []string{"web1"}, AfterStage: "the canary"}}
	w, err = Prepare(Setup{StateDir: state, Bin: "/bin/tofu", Self: self, Nodes: sshNodes("web1", "web3"),
		Environ: []string{contract.Env + "={\"ssh_key_file\":\"/planted\"}"}, Run: contract.Run{SSHKeyFile: "/k/ssh"},
		Layout: Layout{Own: map[string]bool{"web1": true, "web3": true}, Steps: steps}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := contract.Decode(func(k string) string { return w.Env[k] })
	if err != nil || run.SSHKeyFile != "/k/ssh" || !reflect.DeepEqual(run.Rollout, steps) {
		t.Errorf("the provider's run: %+v, %v", run, err)
	}
	if err := w.Relayout(Layout{}); err != nil {
		t.Fatal(err)
	}
	if run, _ := contract.Decode(func(k string) string { return w.Env[k] }); run.Rollout != nil || run.SSHKeyFile != "/k/ssh" {
		t.Errorf("after a relayout without a rollout: %+v", run)
	}
	// Again, with another binary: the link follows.
	if w.Backend != (Backend{Kind: "local", Path: StatePath(state)}) {
		t.Errorf("backend %+v", w.Backend)
	}
	if _, err := Prepare(Setup{StateDir: state, Bin: "/bin/tofu", Self: "/other"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.Readlink(PluginPath(filepath.Join(state, "tofu", "plugins"))); got != "/other" {
		t.Errorf("plugin link -> %q", got)
	}
}

func TestLogLine(t *testing.T) {
	l, ok := LogLine([]byte(`{"@level":"info","@message":"switchyard_deployment.node[\"web1\"]: Creating...","type":"apply_start","hook":{"resource":{"addr":"switchyard_deployment.node[\"web1\"]"}}}`))
	if !ok || l.Node != "web1" || l.Level != "info" || l.Msg != `web1: tofu: switchyard_deployment.node["web1"]: Creating...` || l.Locked {
		t.Errorf("apply_start: %+v %v", l, ok)
	}
	// OpenTofu 1.10's diagnostic for a held lock, recorded on the test bed.
	raw, err := os.ReadFile("testdata/lock-diagnostic.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	l, ok = LogLine(bytes.TrimSpace(raw))
	if !ok || l.Node != "" || l.Level != "error" || !strings.HasPrefix(l.Msg, "tofu: Error: Error acquiring the state lock (Error message: ") || !l.Locked {
		t.Errorf("lock diagnostic: %+v %v", l, ok)
	}
	if _, ok := LogLine([]byte("not json")); ok {
		t.Error("non-JSON line taken")
	}
}

// A failure is the state lock when the -json stream said so or the error output
// (stderr, as terraform-exec wraps it) has the lock's diagnostic; nothing else is.
func TestLockError(t *testing.T) {
	other := errors.New("exit status 1")
	stderr := errors.New("exit status 1\n\nError: Error acquiring the state lock\n\nError message: resource temporarily unavailable")
	for _, tc := range []struct {
		name    string
		sawLock bool
		err     error
		want    bool
	}{
		{"no error", true, nil, false},
		{"another failure", false, other, false},
		{"the -json stream's diagnostic", true, other, true},
		{"the error output", false, stderr, true},
	} {
		err := LockError(tc.sawLock, tc.err)
		if got := errors.Is(err, ErrStateLocked); got != tc.want {
			t.Errorf("%s: %v, want locked=%v", tc.name, err, tc.want)
		}
		if tc.want && !errors.Is(err, tc.err) {
			t.Errorf("%s: %v does not wrap OpenTofu's error", tc.name, err)
		}
	}
}

func TestStateAndPlanReading(t *testing.T) {
	// testdata/state.json: the state of a real failed deploy of web1
	// (go test ./cmd/switchyard -run TestTFApplyFailedVerdict -args -record-state).
	raw, err := os.ReadFile("testdata/state.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Deployments(raw)
	if err != nil || len(d) != 1 || Int(d["web1"]["exit_code"]) != 1 || d["web1"]["ok"] != false ||
		!strings.Contains(d["web1"]["verdict"].(string), `"ok":false`) || !strings.HasPrefix(d["web1"]["toplevel"].(string), "/nix/store/") {
		t.Errorf("deployments %v %v", d, err)
	}
	if d, err := Deployments(nil); err != nil || len(d) != 0 {
		t.Errorf("no state: %v %v", d, err)
	}
	if _, err := Deployments([]byte(`{"version":3}`)); err == nil {
		t.Error("format version 3 read")
	}
	if Int(json.Number("3")) != 3 || Int("x") != 0 {
		t.Error("Int")
	}
	var p tfjson.Plan
	if err := json.Unmarshal([]byte(`{"format_version":"1.2","resource_changes":[
		{"address":"switchyard_deployment.node[\"web1\"]","type":"switchyard_deployment","change":{"actions":["update"]}},
		{"address":"switchyard_deployment.node[\"web2\"]","type":"switchyard_deployment","change":{"actions":["no-op"]}}]}`), &p); err != nil {
		t.Fatal(err)
	}
	if c := ChangedNodes(&p); len(c) != 2 || !c["web1"] || c["web2"] {
		t.Errorf("changed %v", c)
	}
}

func TestLogLineDiagnosticDetail(t *testing.T) {
	line, _ := LogLine([]byte(`{"@level":"error","@message":"Error: web1: verdict failed (exit 3)","type":"diagnostic","diagnostic":{"severity":"error","detail":"web1: wait:\nunreachable","address":"switchyard_deployment.node[\"web1\"]"}}`))
	if line.Msg != "web1: tofu: Error: web1: verdict failed (exit 3) (web1: wait: unreachable)" {
		t.Errorf("line.Msg %q", line.Msg)
	}
}

func TestMainConfigIncus(t *testing.T) {
	b, err := MainConfig([]Node{{Name: "web1", NixosConf: "c1", Drv: "/nix/store/a.drv",
		Instance: &Instance{Project: "tenant-a", Image: "nixos/25.05", Profiles: []string{"default"}, Config: map[string]string{"limits.cpu": "2"}, Type: "virtual-machine"}},
		{Name: "web2", NixosConf: "c2", Drv: "/nix/store/b.drv", Instance: &Instance{Project: "tenant-a", Image: "nixos/25.05"}}},
		Backend{Path: "/s"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Resource map[string]map[string]map[string]any
		Locals   map[string]map[string]map[string]any
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	inst, dep := cfg.Resource["switchyard_incus_instance"]["node"], cfg.Resource["switchyard_deployment"]["node"]
	if inst["name"] != "${each.key}" || inst["image"] != "${each.value.image}" || inst["project"] != "${each.value.project}" || inst["type"] != "${each.value.type}" {
		t.Errorf("instance: %v", inst)
	}
	if dep["incus_instance"] != `${switchyard_incus_instance.node[each.key].name}` || dep["host"] != nil {
		t.Errorf("deployment: %v", dep)
	}
	// The instance type reaches the resource; unset, it is null (the provider's default, a container).
	if w1, w2 := cfg.Locals["nodes"]["web1"], cfg.Locals["nodes"]["web2"]; w1["type"] != "virtual-machine" || w2["type"] != nil {
		t.Errorf("types: web1 %v, web2 %v", w1["type"], w2["type"])
	}
	if w1 := cfg.Locals["nodes"]["web1"]; w1["project"] != "tenant-a" || w1["config"].(map[string]any)["limits.cpu"] != "2" || w1["host"] != nil {
		t.Errorf("web1: %v", w1)
	}
	if _, err := MainConfig([]Node{{Name: "a", Instance: &Instance{}}, {Name: "b", Host: "h"}}, Backend{}, false); err == nil {
		t.Error("SSH and Incus nodes mixed")
	}
	if a := InstanceAddress("web1"); a != `switchyard_incus_instance.node["web1"]` {
		t.Errorf("InstanceAddress %s", a)
	}
}

// TestTenantConfig: tf-incus-operator's graph (issue 12): the project before its
// instances, the identity after the deploy, the pass after registration following
// the deploy and the identity, the nodes' records after the deploy.
func TestTenantConfig(t *testing.T) {
	nodes := []Node{{Name: "web1", NixosConf: "c1", Drv: "/nix/store/a.drv", Group: "web",
		Instance: &Instance{Project: "tenant-a", Image: "img", Profiles: []string{"default"}},
		Entries:  []Entry{{Key: "web1/hello/hello.service", ID: "e1", SpiffeID: "spiffe://td/web/web1/hello", Selectors: []string{"systemd:id:hello.service"}}}}}
	tenant := &Tenant{
		Projects: []Project{{Name: "tenant-a", Description: "d", Config: map[string]string{"features.images": "true"}}},
		DNS: &DNS{Server: "127.0.0.1:53", Zone: "example.", Domain: "t.example.", NodeTTL: 300,
			RRsets: []RRset{{Name: "www.t.example.", Type: "A", TTL: 60, Records: []string{"192.0.2.1"}},
				{Name: "t.example.", Type: "MX", TTL: 60, Records: []string{"10 www.t.example."}}}},
		Spire: &Spire{Server: "unix:///s.sock", TrustDomain: "td"},
	}
	b, err := TenantConfig(nodes, Backend{Path: "/s"}, false, tenant)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Resource map[string]map[string]map[string]any
		Data     map[string]map[string]map[string]any
		Locals   map[string]map[string]any
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	res := cfg.Resource
	for _, c := range []struct{ typ, name, attr, want string }{
		{InstanceType, "node", "project", "${switchyard_incus_project.tenant[each.value.project].name}"},
		{ProjectType, "tenant", "for_each", "${local.projects}"},
		{EntryType, "unit", "parent_id", "${switchyard_spire_agent.node[each.value.node].agent_id}"},
		{VerdictType, "node", "deployment", "${sha256(switchyard_deployment.node[each.key].verdict)}"},
		{RRsetType, "node_a", "records", "${sort(data.switchyard_incus_addresses.node[each.key].ipv4)}"},
		{RRsetType, "node_aaaa", "name", "${each.key}.t.example."},
		{RRsetType, "record", "for_each", "${local.records}"},
		{RRsetType, "address", "for_each", "${local.address_records}"},
	} {
		if got := res[c.typ][c.name][c.attr]; got != c.want {
			t.Errorf("%s.%s.%s = %v, want %s", c.typ, c.name, c.attr, got, c.want)
		}
	}
	if got := res[RRsetType]["record"]["depends_on"]; fmt.Sprint(got) != "[switchyard_dns_rrset.address]" {
		t.Errorf("the MX does not follow the addresses: %v", got)
	}
	// Issue 31 item 6: an MX naming a node follows the node's own addresses.
	tenant.DNS.RRsets[1].Records = []string{"10 WEB1.t.example."}
	if b, err = TenantConfig(nodes, Backend{Path: "/s"}, false, tenant); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Resource[RRsetType]["record"]["depends_on"]; fmt.Sprint(got) != "[switchyard_dns_rrset.address switchyard_dns_rrset.node_a switchyard_dns_rrset.node_aaaa]" {
		t.Errorf("the MX naming web1 does not follow web1's addresses: %v", got)
	}
	if got := res[ResourceType]["node"]["defer_verdict"]; got != true {
		t.Errorf("deployment defer_verdict %v", got)
	}
	if got := res[AgentType]["node"]["depends_on"]; !strings.Contains(fmt.Sprint(got), "switchyard_deployment.node") {
		t.Errorf("the agent does not follow the deploy: %v", got)
	}
	if got := fmt.Sprint(res[VerdictType]["node"]["identity"]); !strings.Contains(got, "switchyard_spire_entry.unit[k].id") {
		t.Errorf("the verdict pass does not follow the entries: %s", got)
	}
	if got := cfg.Data[AddressesType]["node"]["depends_on"]; !strings.Contains(fmt.Sprint(got), "switchyard_deployment.node") {
		t.Errorf("the addresses are read before the deploy: %v", got)
	}
	if got := cfg.Locals["nodes"]["web1"].(map[string]any)["entries"]; fmt.Sprint(got) != "[web1/hello/hello.service]" {
		t.Errorf("web1's entries: %v", got)
	}
	if _, err := TenantConfig(nodes, Backend{Path: "/s"}, false, &Tenant{}); err == nil {
		t.Error("an instance in a project that is no tenant's: no error")
	}
	if got := NodeOf(`switchyard_spire_entry.unit["web1/hello/hello.service"]`); got != "web1" {
		t.Errorf("NodeOf(entry) = %q", got)
	}
	if got := NodeOf(`data.switchyard_incus_addresses.node["web2"]`); got != "web2" {
		t.Errorf("NodeOf(addresses) = %q", got)
	}
}

// Issue 14 item 3: init is skipped when the directory was initialised for the same
// OpenTofu, provider binary, backend and CLI configuration, and runs again (lock file
// removed) when any of them changed. A new node needs no init.
func TestPrepareSkipsInit(t *testing.T) {
	state, bin := t.TempDir(), t.TempDir()
	tofuBin, self := filepath.Join(bin, "tofu"), filepath.Join(bin, "switchyard")
	for _, f := range []string{tofuBin, self} {
		if err := os.WriteFile(f, []byte("v1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	setup := func(nodes ...string) Setup {
		s := Setup{StateDir: state, Bin: tofuBin, Self: self}
		for _, n := range nodes {
			s.Nodes = append(s.Nodes, Node{Name: n, NixosConf: "c", Drv: "d", Host: "h"})
		}
		return s
	}
	// What a successful init leaves.
	initialise := func(w *Workspace) {
		t.Helper()
		os.MkdirAll(filepath.Join(w.Dir, ".terraform"), 0o755)
		os.WriteFile(filepath.Join(w.Dir, ".terraform.lock.hcl"), []byte("# lock"), 0o644)
		if err := w.MarkInitialized(); err != nil {
			t.Fatal(err)
		}
	}
	lockFile := filepath.Join(state, "tofu", ".terraform.lock.hcl")
	w, err := Prepare(setup("web1"))
	if err != nil || w.Initialized {
		t.Fatalf("first Prepare: initialized %v, %v", w.Initialized, err)
	}
	initialise(w)
	if w, err = Prepare(setup("web1", "web2")); err != nil || !w.Initialized {
		t.Fatalf("same binaries, a node more: initialized %v, %v; want true", w.Initialized, err)
	}
	if _, err := os.Stat(lockFile); err != nil {
		t.Errorf("lock file removed although init is skipped: %v", err)
	}
	// A rebuilt switchyard (another size and time) is another provider.
	later := time.Now().Add(time.Minute)
	os.WriteFile(self, []byte("v2, rebuilt"), 0o755)
	os.Chtimes(self, later, later)
	if w, err = Prepare(setup("web1")); err != nil || w.Initialized {
		t.Fatalf("rebuilt provider: initialized %v, %v; want false", w.Initialized, err)
	}
	if _, err := os.Stat(lockFile); !os.IsNotExist(err) {
		t.Errorf("lock file kept for a rebuilt provider: %v", err)
	}
	initialise(w)
	// Another backend.
	s := setup("web1")
	s.Backend, s.Extra = Backend{Kind: "pg"}, map[string]string{"PG_CONN_STR": "postgres://127.0.0.1/a"}
	if w, err = Prepare(s); err != nil || w.Initialized {
		t.Fatalf("pg backend: initialized %v, %v; want false", w.Initialized, err)
	}
	initialise(w)
	if w, err = Prepare(s); err != nil || !w.Initialized {
		t.Fatalf("pg again: initialized %v, %v; want true", w.Initialized, err)
	}
	if mark, _ := os.ReadFile(filepath.Join(w.Dir, initMark)); strings.Contains(string(mark), "postgres") {
		t.Errorf("the connection string is written in the init mark: %s", mark)
	}
	s.Extra = map[string]string{"PG_CONN_STR": "postgres://127.0.0.1/b"}
	if w, err = Prepare(s); err != nil || w.Initialized {
		t.Fatalf("another connection string: initialized %v, %v; want false", w.Initialized, err)
	}
	// The directory's init lost (.terraform removed by hand).
	initialise(w)
	os.RemoveAll(filepath.Join(w.Dir, ".terraform"))
	if w, err = Prepare(s); err != nil || w.Initialized {
		t.Fatalf(".terraform gone: initialized %v, %v; want false", w.Initialized, err)
	}
}

// Issue 31 item 3: the instances a plan updates or replaces, not those it creates,
// reads or leaves alone (actions as `tofu show -json` prints them).
func TestChangedInstances(t *testing.T) {
	var p tfjson.Plan
	if err := json.Unmarshal([]byte(`{"format_version":"1.2","resource_changes":[
		{"address":"switchyard_incus_instance.node[\"web1\"]","type":"switchyard_incus_instance","change":{"actions":["delete","create"]}},
		{"address":"switchyard_incus_instance.node[\"web2\"]","type":"switchyard_incus_instance","change":{"actions":["update"]}},
		{"address":"switchyard_incus_instance.node[\"web3\"]","type":"switchyard_incus_instance","change":{"actions":["create"]}},
		{"address":"switchyard_incus_instance.node[\"web4\"]","type":"switchyard_incus_instance","change":{"actions":["no-op"]}},
		{"address":"switchyard_deployment.node[\"web5\"]","type":"switchyard_deployment","change":{"actions":["update"]}}]}`), &p); err != nil {
		t.Fatal(err)
	}
	if c := ChangedInstances(&p); len(c) != 2 || !c["web1"] || !c["web2"] {
		t.Errorf("changed instances %v, want web1 (replaced) and web2 (updated)", c)
	}
	if c := ChangedInstances(nil); len(c) != 0 {
		t.Errorf("no plan: %v", c)
	}
}

func TestNewInstances(t *testing.T) {
	var p tfjson.Plan
	if err := json.Unmarshal([]byte(`{"format_version":"1.2","resource_changes":[
		{"address":"switchyard_incus_instance.node[\"web1\"]","type":"switchyard_incus_instance","change":{"actions":["delete","create"]}},
		{"address":"switchyard_incus_instance.node[\"web2\"]","type":"switchyard_incus_instance","change":{"actions":["create","delete"]}},
		{"address":"switchyard_incus_instance.node[\"web3\"]","type":"switchyard_incus_instance","change":{"actions":["create"]}},
		{"address":"switchyard_incus_instance.node[\"web4\"]","type":"switchyard_incus_instance","change":{"actions":["update"]}},
		{"address":"switchyard_incus_instance.node[\"web5\"]","type":"switchyard_incus_instance","change":{"actions":["no-op"]}},
		{"address":"switchyard_incus_instance.node[\"web6\"]","type":"switchyard_incus_instance","change":{"actions":["delete"]}},
		{"address":"switchyard_deployment.node[\"web7\"]","type":"switchyard_deployment","change":{"actions":["create"]}}]}`), &p); err != nil {
		t.Fatal(err)
	}
	// Replaced either way round, or created: not there as planned before the apply.
	// Updated in place, untouched, deleted, or a deployment (of an SSH node): there.
	if c := NewInstances(&p); len(c) != 3 || !c["web1"] || !c["web2"] || !c["web3"] {
		t.Errorf("new instances %v, want web1, web2 (replaced) and web3 (created)", c)
	}
	if c := NewInstances(nil); len(c) != 0 {
		t.Errorf("no plan: %v", c)
	}
}
