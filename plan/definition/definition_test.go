package definition

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-nix/switchyard/nix/nixtest"
	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/field"
)

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// newTree is a tree with a few module files and the given deployment file.
func newTree(t testing.TB, file, content string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tree")
	for _, f := range []string{"apps/hello.nix", "apps/mail.nix", "hosts/web1.nix", "builder.nix"} {
		write(t, filepath.Join(dir, f), "{ ... }: { }\n")
	}
	write(t, filepath.Join(dir, "files", "motd.txt"), "hi\n")
	if file != "" {
		write(t, filepath.Join(dir, file), content)
	}
	return dir
}

const good = `{
  "domain": "example.org", "email": "ops@example.org", "system": "builder.nix",
  "applications": {
    "hello": {"enable": true, "module": "apps/hello.nix", "settings": {"greeting": "hi", "motd": {"_repoPath": "files/motd.txt"}}},
    "mail": {"module": "./apps//mail.nix"}
  },
  "groups": {
    "web": {"applications": ["hello", "mail"], "nodes": {
      "web1": {"modules": ["hosts/web1.nix"], "tags": ["edge", "eu-1"], "ssh": {"host": "192.0.2.10", "hostKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4inzM5jOx8xxmjhITtKFD7q0B50Pu07HOHGjAEY+JB comment"},
               "incus": {"image": "nixos/25.05", "limits": {"cpu": 2, "memory": "2GiB"}}},
      "web2": {"enable": false, "substituteOnNode": false}
    }},
    "empty": {}
  },
  "deployment-method": {"tf-incus": {"project": "p"}, "ssh": {"parallel": 3}}
}`

func TestLoadJSON(t *testing.T) {
	dir := newTree(t, JSONFile, good)
	d, err := Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &Definition{
		Source: JSONFile, Domain: "example.org", Email: "ops@example.org", Builder: "builder.nix",
		Applications: map[string]Application{
			"hello": {Enable: true, Module: "apps/hello.nix", Settings: map[string]any{"greeting": "hi", "motd": data.RepoPath("files/motd.txt")}, Units: []string{"hello.service"}},
			"mail":  {Module: "apps/mail.nix", Settings: map[string]any{}, Units: []string{"mail.service"}},
		},
		Groups: map[string]Group{
			"web": {Applications: []string{"hello", "mail"}, Nodes: map[string]Node{
				"web1": {Enable: true, Modules: []data.RepoPath{"hosts/web1.nix"}, Tags: []string{"edge", "eu-1"}, SubstituteOnNode: true,
					SSH:   &SSH{Host: "192.0.2.10", Port: 22, User: "root", HostKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4inzM5jOx8xxmjhITtKFD7q0B50Pu07HOHGjAEY+JB"},
					Incus: &Incus{Image: "nixos/25.05", Profiles: []string{"default"}, Limits: Limits{CPU: 2, Memory: "2GiB"}, Type: InstanceContainer}},
				"web2": {Enable: false},
			}},
			"empty": {Applications: []string{}, Nodes: map[string]Node{}},
		},
		MethodSettings: map[string]map[string]any{"tf-incus": {"project": "p"}, "ssh": {"parallel": jsonNumber("3")}},
		DNS:            DNS{Records: map[string]Record{}},
	}
	if d := cmp.Diff(want, d, cmpopts.IgnoreFields(Definition{}, "Tree")); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if d.System() != "builder.nix" || d.Tree.Root != dir {
		t.Errorf("system %q, tree %q", d.System(), d.Tree.Root)
	}
}

func TestRefusals(t *testing.T) {
	edit := func(old, new string) string {
		if !strings.Contains(good, old) {
			t.Fatalf("%q not in the definition", old)
		}
		return strings.Replace(good, old, new, 1)
	}
	for _, tc := range []struct {
		name, def, path, reason string
		setup                   func(dir string)
	}{
		{"unknown top-level field", edit(`"domain"`, `"domian": 1, "domain"`), "domian", "unknown field", nil},
		{"unknown application field", edit(`"enable": true,`, `"enable": true, "modul": "x",`), "applications.hello.modul", "unknown field", nil},
		{"unknown node field", edit(`"web2": {"enable": false,`, `"web2": {"enable": false, "sshh": {},`), "groups.web.nodes.web2.sshh", "unknown field", nil},
		{"unknown ssh field", edit(`"host": "192.0.2.10"`, `"host": "192.0.2.10", "hots": "x"`), "groups.web.nodes.web1.ssh.hots", "unknown field", nil},
		{"unknown limit", edit(`"cpu": 2`, `"cpu": 2, "disk": "1G"`), "groups.web.nodes.web1.incus.limits.disk", "unknown field", nil},
		{"unknown group field", edit(`"empty": {}`, `"empty": {"hosts": []}`), "groups.empty.hosts", "unknown field", nil},
		{"unknown method", edit(`"ssh": {"parallel": 3}`, `"ssh": {"parallel": 3}, "scp": {}`), "deployment-method.scp", "unknown method", nil},
		{"unknown method setting", edit(`"ssh": {"parallel": 3}`, `"ssh": {"project": "p"}`), "deployment-method.ssh.project", "unknown setting of method ssh", nil},
		{"method setting of the wrong type", edit(`"parallel": 3`, `"parallel": "3"`), "deployment-method.ssh.parallel", "wrong type", nil},
		{"module leaving the tree", edit(`"apps/hello.nix"`, `"../outside.nix"`), "applications.hello.module", "leaves the tree (..)", nil},
		{"module with .. inside", edit(`"apps/hello.nix"`, `"apps/../apps/hello.nix"`), "applications.hello.module", "leaves the tree (..)", nil},
		{"absolute module", edit(`"apps/hello.nix"`, `"/etc/hostname"`), "applications.hello.module", "absolute", nil},
		{"node module leaving the tree", edit(`["hosts/web1.nix"]`, `["hosts/web1.nix", "../../etc/passwd"]`), "groups.web.nodes.web1.modules[1]", "leaves the tree", nil},
		{"missing module", edit(`"apps/hello.nix"`, `"apps/nope.nix"`), "applications.hello.module", "does not exist", nil},
		{"module symlinked out", edit(`"apps/hello.nix"`, `"apps/evil.nix"`), "applications.hello.module", "leaves the tree through a symlink", func(dir string) {
			os.Symlink("/etc/hostname", filepath.Join(dir, "apps", "evil.nix"))
		}},
		{"directory symlinked out", edit(`["hosts/web1.nix"]`, `["etc/passwd"]`), "groups.web.nodes.web1.modules[0]", "leaves the tree through a symlink", func(dir string) {
			os.Symlink("/etc", filepath.Join(dir, "etc"))
		}},
		{"tree path setting leaving the tree", edit(`"files/motd.txt"`, `"../motd"`), "applications.hello.settings.motd", "leaves the tree", nil},
		{"tree path setting symlinked out", edit(`"files/motd.txt"`, `"files/shadow"`), "applications.hello.settings.motd", "through a symlink", func(dir string) {
			os.Symlink("/etc/shadow", filepath.Join(dir, "files", "shadow"))
		}},
		{"builder missing", edit(`"builder.nix"`, `"build.nix"`), "system", "does not exist", nil},
		{"system of the wrong type", edit(`"system": "builder.nix"`, `"system": 1`), "system", "wrong type", nil},
		{"unknown application in a group", edit(`["hello", "mail"]`, `["hello", "wiki"]`), "groups.web.applications[1]", `unknown application "wiki"`, nil},
		{"application listed twice", edit(`["hello", "mail"]`, `["hello", "hello"]`), "groups.web.applications[1]", "listed twice", nil},
		{"node in two groups", edit(`"empty": {}`, `"empty": {"nodes": {"web1": {}}}`), "groups.web.nodes.web1", "already defined at groups.empty.nodes.web1", nil},
		{"bad node name", edit(`"web2": {`, `"web 2": {`), `groups.web.nodes."web 2"`, "not a valid node name", nil},
		{"node name with a dot", edit(`"web2": {`, `"..": {`), `groups.web.nodes.".."`, "not a valid node name", nil},
		{"bad host key", edit(`"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4inzM5jOx8xxmjhITtKFD7q0B50Pu07HOHGjAEY+JB comment"`, `"ssh-ed25519 placeholder"`), "groups.web.nodes.web1.ssh.hostKey", "not a public key", nil},
		{"tags not a list", edit(`["edge", "eu-1"]`, `"edge"`), "groups.web.nodes.web1.tags", "want a list of tag names", nil},
		{"bad tag", edit(`["edge", "eu-1"]`, `["edge", "@eu"]`), "groups.web.nodes.web1.tags[1]", "not a tag name", nil},
		{"tag twice", edit(`["edge", "eu-1"]`, `["edge", "edge"]`), "groups.web.nodes.web1.tags[1]", "given twice", nil},
		{"port out of range", edit(`"host": "192.0.2.10"`, `"host": "192.0.2.10", "port": 70000`), "groups.web.nodes.web1.ssh.port", "not between 1 and 65535", nil},
		{"host missing", edit(`"host": "192.0.2.10", `, ``), "groups.web.nodes.web1.ssh.host", "not a host", nil},
		{"image missing", edit(`"image": "nixos/25.05", `, ``), "groups.web.nodes.web1.incus.image", "required", nil},
		{"unknown instance type", edit(`"image": "nixos/25.05", `, `"image": "nixos/25.05", "type": "vm", `), "groups.web.nodes.web1.incus.type", `"vm" is not an instance type: want "container" or "virtual-machine"`, nil},
		{"instance type of the wrong type", edit(`"image": "nixos/25.05", `, `"image": "nixos/25.05", "type": true, `), "groups.web.nodes.web1.incus.type", "wrong type", nil},
		{"substituteOnNode of the wrong type", edit(`"substituteOnNode": false`, `"substituteOnNode": "no"`), "groups.web.nodes.web2.substituteOnNode", "wrong type: a string, want a boolean", nil},
		{"enable of the wrong type", edit(`"enable": true,`, `"enable": "yes",`), "applications.hello.enable", "wrong type: a string, want a boolean", nil},
		{"settings not an object", edit(`"module": "./apps//mail.nix"`, `"module": "./apps//mail.nix", "settings": []`), "applications.mail.settings", "wrong type: an array, want an object", nil},
		{"nixpkgs relative", edit(`"domain"`, `"nixpkgs": "nixpkgs", "domain"`), "nixpkgs", "not an absolute path", nil},
		{"duplicate key", edit(`"domain": "example.org"`, `"domain": "a", "domain": "b"`), "domain", "duplicate key", nil},
		{"unknown dns field", edit(`"domain"`, `"dns": {"record": {}}, "domain"`), "dns.record", "unknown field", nil},
		{"unknown record type", edit(`"domain"`, `"dns": {"records": {"www": {"SPF": ["x"]}}}, "domain"`), "dns.records.www.SPF", "unknown field", nil},
		{"bad record name", edit(`"domain"`, `"dns": {"records": {"a b": {"A": ["192.0.2.1"]}}}, "domain"`), `dns.records."a b"`, "not a name relative to the domain", nil},
		{"negative ttl", edit(`"domain"`, `"dns": {"records": {"www": {"A": ["192.0.2.1"], "ttl": -1}}}, "domain"`), "dns.records.www.ttl", "not a TTL", nil},
		{"empty record set", edit(`"domain"`, `"dns": {"records": {"www": {"A": []}}}, "domain"`), "dns.records.www.A", "no values", nil},
		{"cname beside others", edit(`"domain"`, `"dns": {"records": {"www": {"A": ["192.0.2.1"], "CNAME": ["x"]}}}, "domain"`), "dns.records.www.CNAME", "only record", nil},
		{"apex cname", edit(`"domain"`, `"dns": {"records": {"@": {"CNAME": ["x.example."]}}}, "domain"`), `dns.records."@".CNAME`, "apex", nil},
		{"record value not a string", edit(`"domain"`, `"dns": {"records": {"www": {"A": [1]}}}, "domain"`), "dns.records.www.A[0]", "wrong type", nil},
		{"unit not a unit name", edit(`"enable": true,`, `"enable": true, "units": ["hello"],`), "applications.hello.units[0]", "not a systemd unit name", nil},
		{"unit with a path", edit(`"enable": true,`, `"enable": true, "units": ["../x.service"],`), "applications.hello.units[0]", "not a systemd unit name", nil},
		{"unknown submissions field", edit(`"domain"`, `"submissions": {"allowedSigner": "files/motd.txt"}, "domain"`), "submissions.allowedSigner", "unknown field", nil},
		{"allowedSigners leaving the tree", edit(`"domain"`, `"submissions": {"allowedSigners": "../allowed_signers"}, "domain"`), "submissions.allowedSigners", "leaves the tree (..)", nil},
		{"allowedSigners missing", edit(`"domain"`, `"submissions": {"allowedSigners": "allowed_signers"}, "domain"`), "submissions.allowedSigners", "does not exist", nil},
		{"allowedSigners symlinked out", edit(`"domain"`, `"submissions": {"allowedSigners": "allowed_signers"}, "domain"`), "submissions.allowedSigners", "leaves the tree through a symlink", func(dir string) {
			os.Symlink("/etc/hostname", filepath.Join(dir, "allowed_signers"))
		}},
		{"requireSignature without allowedSigners", edit(`"domain"`, `"submissions": {"requireSignature": true}, "domain"`), "submissions.requireSignature", "requires allowedSigners", nil},
		{"requireSignature of the wrong type", edit(`"domain"`, `"submissions": {"allowedSigners": "files/motd.txt", "requireSignature": "yes"}, "domain"`), "submissions.requireSignature", "wrong type", nil},
		{"not data", edit(`"greeting": "hi"`, `"greeting": {"__switchyard_not_data": "a function"}`), "applications.hello.settings.greeting", "not data: a function", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newTree(t, JSONFile, tc.def)
			if tc.setup != nil {
				tc.setup(dir)
			}
			_, err := Load(context.Background(), dir)
			var fe *field.Error
			if !errors.As(err, &fe) {
				t.Fatalf("error %v, want a refusal", err)
			}
			if string(fe.Path) != tc.path || !strings.Contains(fe.Reason, tc.reason) || fe.Source != JSONFile {
				t.Errorf("got %q\nwant deployment.json: %s: ...%s...", fe.Error(), tc.path, tc.reason)
			}
		})
	}
}

// TestSubmissions reads submissions: who may sign a DEPLOYMENT (issue 16 item 1), where
// its credentials may be staged and which groups a signer reaches (issue 29).
func TestSubmissions(t *testing.T) {
	def := strings.Replace(good, `"domain"`, `"submissions": {"allowedSigners": "./files/motd.txt", "requireSignature": true,
	  "credentialDirs": ["/run/api-staging/", "/var/lib/api/creds"], "scopes": {"alice@example.org": ["web"]}}, "domain"`, 1)
	d, err := Load(context.Background(), newTree(t, JSONFile, def))
	if err != nil {
		t.Fatal(err)
	}
	want := Submissions{AllowedSigners: "files/motd.txt", RequireSignature: true,
		CredentialDirs: []string{"/run/api-staging", "/var/lib/api/creds"}, Scopes: map[string][]string{"alice@example.org": {"web"}}}
	if diff := cmp.Diff(want, d.Submissions); diff != "" {
		t.Errorf("submissions (-want +got)\n%s", diff)
	}
	d, err = Load(context.Background(), newTree(t, JSONFile, good))
	if err != nil || !cmp.Equal(d.Submissions, Submissions{}) {
		t.Errorf("no submissions: %+v, %v", d.Submissions, err)
	}
	for _, tc := range []struct{ name, edit, at, reason string }{
		{"relative credential dir", `"credentialDirs": ["run/creds"]`, "submissions.credentialDirs[0]", "not an absolute directory"},
		{"root as credential dir", `"credentialDirs": ["/"]`, "submissions.credentialDirs[0]", "not an absolute directory"},
		{"credential dir not a string", `"credentialDirs": [3]`, "submissions.credentialDirs[0]", "wrong type"},
		{"scope of an unknown group", `"scopes": {"a": ["web", "db"]}`, "submissions.scopes.a[1]", `unknown group "db"`},
		{"scope not a list", `"scopes": {"a": "web"}`, "submissions.scopes.a", "wrong type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := strings.Replace(good, `"domain"`, `"submissions": {`+tc.edit+`}, "domain"`, 1)
			_, err := Load(context.Background(), newTree(t, JSONFile, def))
			var fe *field.Error
			if !errors.As(err, &fe) || string(fe.Path) != tc.at || !strings.Contains(fe.Reason, tc.reason) {
				t.Fatalf("got %v, want %q at %s", err, tc.reason, tc.at)
			}
		})
	}
}

// TestGroupDomains reads groups.<g>.domains (issue 29 item 3).
func TestGroupDomains(t *testing.T) {
	def := strings.Replace(good, `"web": {"applications"`, `"web": {"domains": ["Tenant.example", "b.example"], "applications"`, 1)
	d, err := Load(context.Background(), newTree(t, JSONFile, def))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"tenant.example", "b.example"}, d.Groups["web"].Domains); diff != "" {
		t.Errorf("domains (-want +got)\n%s", diff)
	}
	def = strings.Replace(good, `"web": {"applications"`, `"web": {"domains": ["tenant.example."], "applications"`, 1)
	var fe *field.Error
	if _, err := Load(context.Background(), newTree(t, JSONFile, def)); !errors.As(err, &fe) || fe.Path != "groups.web.domains[0]" {
		t.Fatalf("a domain with a final dot: %v", err)
	}
}

// TestDNSRecordsAndUnits reads dns.records and application units (issue 12 item 3, 4).
func TestDNSRecordsAndUnits(t *testing.T) {
	def := strings.Replace(good, `"domain"`, `"dns": {"records": {"@": {"MX": ["10 mail"], "TXT": ["v=spf1 -all"]}, "www": {"CNAME": ["@"], "ttl": 60}}}, "domain"`, 1)
	def = strings.Replace(def, `"enable": true,`, `"enable": true, "units": ["hello.service", "hello-worker@1.service"],`, 1)
	d, err := Load(context.Background(), newTree(t, JSONFile, def))
	if err != nil {
		t.Fatal(err)
	}
	want := DNS{Records: map[string]Record{
		"@":   {Sets: map[string][]string{"MX": {"10 mail"}, "TXT": {"v=spf1 -all"}}, TTL: DefaultTTL},
		"www": {Sets: map[string][]string{"CNAME": {"@"}}, TTL: 60},
	}}
	if diff := cmp.Diff(want, d.DNS); diff != "" {
		t.Errorf("dns (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]string{"hello.service", "hello-worker@1.service"}, d.Applications["hello"].Units); diff != "" {
		t.Errorf("units (-want +got)\n%s", diff)
	}
}

func TestWhichFile(t *testing.T) {
	for name, files := range map[string][]string{"neither": nil, "both": {NixFile, JSONFile}} {
		dir := newTree(t, "", "")
		for _, f := range files {
			write(t, filepath.Join(dir, f), "{}")
		}
		if _, err := Load(context.Background(), dir); !field.IsRefusal(err) {
			t.Errorf("%s: error %v, want a refusal", name, err)
		}
	}
	if _, err := Load(context.Background(), "/nonexistent/tree"); !field.IsRefusal(err) {
		t.Errorf("a missing tree: %v, want a refusal", err)
	}
}

func TestEvalArgv(t *testing.T) {
	argv := EvalArgv("/t")
	if d := cmp.Diff([]string{"nix-instantiate", "--eval", "--strict", "--json", "--argstr", "tree", "/t", "--expr"}, argv[:8]); d != "" || len(argv) != 9 {
		t.Errorf("(-want +got)\n%s", d)
	}
	if !strings.Contains(argv[8], "__switchyard_not_data") {
		t.Error("the expression is not nix/definition.nix")
	}
}

// deployment.nix through the real nix-instantiate: paths become tree paths, values that
// are not data are refused at their field path.
func TestLoadNix(t *testing.T) {
	nixtest.Require(t, "nix-instantiate")
	dir := newTree(t, NixFile, `{
	  domain = "example.org";
	  system = ./builder.nix;
	  nixpkgs = ./.;
	  applications.hello = { enable = true; module = ./apps/hello.nix; settings = { motd = ./files/motd.txt; n = 1; f = 1.5; l = [ ./hosts/web1.nix "x" ]; }; };
	  groups.web.applications = [ "hello" ];
	  groups.web.nodes.web1 = { modules = [ "hosts/web1.nix" ./apps/mail.nix ]; ssh.host = "192.0.2.1"; };
	}`)
	d, err := Load(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"motd": data.RepoPath("files/motd.txt"), "n": jsonNumber("1"), "f": jsonNumber("1.5"),
		"l": []any{data.RepoPath("hosts/web1.nix"), "x"}}
	if diff := cmp.Diff(want, d.Applications["hello"].Settings); diff != "" {
		t.Errorf("settings (-want +got)\n%s", diff)
	}
	if d.Builder != "builder.nix" || d.Applications["hello"].Module != "apps/hello.nix" || d.Nixpkgs != dir || d.Source != NixFile {
		t.Errorf("builder %q, module %q, nixpkgs %q", d.Builder, d.Applications["hello"].Module, d.Nixpkgs)
	}
	if diff := cmp.Diff([]data.RepoPath{"hosts/web1.nix", "apps/mail.nix"}, d.Groups["web"].Nodes["web1"].Modules); diff != "" {
		t.Errorf("modules (-want +got)\n%s", diff)
	}

	for _, tc := range []struct{ value, path, reason string }{
		{`x: x`, "applications.hello.settings.v", "not data: a function"},
		{`{ a = [ (x: x) ]; }`, "applications.hello.settings.v.a[0]", "not data: a function"},
		{`derivation { name = "x"; system = "x"; builder = "/bin/sh"; }`, "applications.hello.settings.v", "not data: a derivation"},
		{`"${./files/motd.txt}"`, "applications.hello.settings.v", "not data: a string with store context"},
		{`/etc/hostname`, "applications.hello.settings.v", "not data: a path outside the tree (/etc/hostname)"},
		{`./.`, "applications.hello.settings.v", "not data: the tree itself"},
		{`{ outPath = "/nix/store/x"; }`, "applications.hello.settings.v", "not data: a store object"},
	} {
		dir := newTree(t, NixFile, `{ applications.hello = { module = "apps/hello.nix"; settings.v = `+tc.value+`; }; }`)
		_, err := Load(context.Background(), dir)
		var fe *field.Error
		if !errors.As(err, &fe) || string(fe.Path) != tc.path || !strings.Contains(fe.Reason, tc.reason) || fe.Source != NixFile {
			t.Errorf("%s: error %v, want deployment.nix: %s: %s", tc.value, err, tc.path, tc.reason)
		}
	}

	dir = newTree(t, NixFile, `{ domain = ; }`)
	_, err = Load(context.Background(), dir)
	var ee *EvalError
	if !errors.As(err, &ee) || field.IsRefusal(err) || !strings.Contains(ee.Stderr, "syntax error") {
		t.Errorf("a syntax error: %v, want an *EvalError", err)
	}
}

func TestWalkPaths(t *testing.T) {
	var got []string
	WalkPaths(map[string]any{"b": []any{data.RepoPath("x"), map[string]any{"c": data.RepoPath("y")}}, "a": data.RepoPath("z")}, "s",
		func(p field.Path, rp data.RepoPath) { got = append(got, string(p)+"="+string(rp)) })
	if d := cmp.Diff([]string{"s.a=z", "s.b[0]=x", "s.b[1].c=y"}, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}
