package tofu

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/rollout"
)

var update = flag.Bool("update", false, "rewrite testdata/main.tf.json/*.json from what the code generates now")

// incusNodes are tf-incus nodes, one a VM, in a tenant's project.
func incusNodes(names ...string) []Node {
	var out []Node
	for i, n := range names {
		inst := &Instance{Project: "tenant-a", Image: "nixos/26.05", Profiles: []string{"default"}}
		if i == 0 {
			inst.Type, inst.Config = "virtual-machine", map[string]string{"limits.memory": "2GiB"}
		}
		out = append(out, Node{Name: n, NixosConf: "conf-" + n, Drv: "/nix/store/x-" + n + ".drv", Instance: inst})
	}
	return out
}

// The generated main.tf.json of each method against its golden file (issue 33 item
// 1): any change to the graph OpenTofu gets shows as a diff here, and
// `go test ./tofu -run TestGoldenConfigs -update` records it.
func TestGoldenConfigs(t *testing.T) {
	spec, err := rollout.Parse("canary=1,batch=1")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"web1", "web2", "web3"}
	all := map[string]bool{"web1": true, "web2": true, "web3": true}
	operator := incusNodes("web1", "web2")
	for i := range operator {
		operator[i].Group = "web"
		operator[i].Entries = []Entry{{Key: operator[i].Name + "/hello/hello.service", ID: "e-" + operator[i].Name,
			SpiffeID: "spiffe://td/web/" + operator[i].Name + "/hello", Selectors: []string{"systemd:id:hello.service"}}}
	}
	tenant := &Tenant{
		Projects: []Project{{Name: "tenant-a", Description: "tenant a", Config: map[string]string{"features.images": "true"}}},
		DNS: &DNS{Server: "127.0.0.1:5353", Zone: "test.example.", Domain: "test.example.", NodeTTL: 300,
			RRsets: []RRset{{Name: "front.test.example.", Type: "A", TTL: 300, Records: []string{"192.0.2.100"}},
				{Name: "test.example.", Type: "MX", TTL: 300, Records: []string{"10 mail.test.example.", "20 web1.test.example."}}}},
		Spire: &Spire{Server: "unix:///run/spire/server/api.sock", TrustDomain: "td"},
	}
	for _, c := range []struct {
		name    string
		nodes   []Node
		backend Backend
		tenant  *Tenant
		layout  Layout
	}{
		{"tf", sshNodes(names...), Backend{Kind: "local", Path: "/srv/state/terraform.tfstate"}, nil, Layout{}},
		{"tf-pg", sshNodes(names...), Backend{Kind: "pg"}, nil, Layout{}},
		{"tf-incus", incusNodes(names...), Backend{Kind: "local", Path: "/srv/state/terraform.tfstate"}, nil, Layout{}},
		{"tf-incus-rollout", incusNodes(names...), Backend{Kind: "local", Path: "/srv/state/terraform.tfstate"}, nil,
			Staged(rollout.Stages(names, all, spec))},
		{"tf-incus-operator", operator, Backend{Kind: "local", Path: "/srv/state/terraform.tfstate"}, tenant, Layout{}},
	} {
		raw, err := LayoutConfig(c.nodes, c.backend, false, c.tenant, c.layout, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got bytes.Buffer
		if err := json.Indent(&got, raw, "", "  "); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got.WriteByte('\n')
		path := filepath.Join("testdata", "main.tf.json", c.name+".json")
		if *update {
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run with -update to record it)", c.name, err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: main.tf.json differs from %s; if the change is meant, record it with -update:\n%s", c.name, path, got.String())
		}
	}
}

// The configuration types list their fields in the order of their JSON names, as
// encoding/json writes a map's keys: a field added out of order would reorder
// main.tf.json against what a map-built file had (and the goldens).
func TestConfigFieldsSorted(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Map || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		prev := ""
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				continue // TTL: its own MarshalJSON
			}
			if name < prev {
				t.Errorf("%s: %q after %q: list the fields in the order of their JSON names", typ.Name(), name, prev)
			}
			prev = name
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(Config{}))
	for _, local := range []any{SSHNode{}, IncusNode{}} {
		walk(reflect.TypeOf(local))
	}
	if len(seen) < 20 {
		t.Errorf("walked %d types: the walk misses the configuration's", len(seen))
	}
}
