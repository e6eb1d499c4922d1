package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/spire"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/testbed/dnsserver"
	"github.com/switchyard-nix/switchyard/testbed/spireserver"
)

// operatorRecords is the tree's dns.records of the operator tests: A, CNAME, TXT and
// MX (issue 12's acceptance); the second MX names a node, whose address record
// bind9 wants first (issue 31 item 6).
var operatorRecords = map[string]any{"records": map[string]any{
	"@":     map[string]any{"MX": []string{"10 mail", "20 web1"}, "TXT": []string{"v=spf1 -all"}},
	"front": map[string]any{"A": []string{"192.0.2.100"}, "ttl": 300},
	// bind9 refuses an MX whose in-zone exchange has no address (check-integrity).
	"mail": map[string]any{"A": []string{"192.0.2.25"}},
	"www":  map[string]any{"CNAME": []string{"front"}},
}}

// operatorBed is one tenant's world: a DNS server of one kind, a SPIRE server, a
// throwaway project name, a tree whose group web runs hello and mail on two Incus
// nodes.
type operatorBed struct {
	dns     *dnsserver.Server
	spire   *spireserver.Server
	project string
	tree    string
	state   string
	keyFile string
	env     []string
}

const operatorDomain = "test.example"

func newOperatorBed(t *testing.T, kind string) *operatorBed {
	t.Helper()
	testbed.Require(t)
	needTofu(t)
	b := &operatorBed{}
	b.dns = dnsserver.Start(t, kind, operatorDomain+".", "hmac-sha256")
	b.spire = spireserver.Start(t, operatorDomain)
	id := make([]byte, 4)
	rand.Read(id)
	b.project = "switchyard-test-" + hex.EncodeToString(id)
	t.Cleanup(func() { removeProject(t, b.project) })
	b.tree = t.TempDir()
	writeOperatorTree(t, b, operatorRecords)
	b.state = filepath.Join(b.tree, ".switchyard")
	// The tenant's staged TSIG key: the server's copy is readable by its daemon's user,
	// a credential is the deployer's alone (SPEC 6.9).
	key, err := os.ReadFile(b.dns.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	b.keyFile = filepath.Join(t.TempDir(), "tsig.key")
	if err := os.WriteFile(b.keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	b.env = []string{b.deployment(b.keyFile), "DEPLOY_EVAL_CACHE_DIR=" + t.TempDir()}
	return b
}

// methods is the tree's tf-incus-operator settings: the project, its config and the
// servers are anchors, which only the tree sets (SPEC 6.9).
func (b *operatorBed) methods() map[string]map[string]any {
	return map[string]map[string]any{"tf-incus-operator": {
		"project": b.project, "dnsServer": b.dns.Addr, "spireServer": b.spire.Addr,
		"projectConfig": map[string]any{"limits.instances": "5"},
	}}
}

// deployment is the tenant's submission: an application and the staged TSIG key.
func (b *operatorBed) deployment(keyFile string) string {
	return fmt.Sprintf(`DEPLOYMENT={"deployment-method":{"tf-incus-operator":{"applications":{"mail":{"enable":true}},`+
		`"dnsTsigKeyFile":%q}}}`, keyFile)
}

// removeProject deletes what a failed test left in the project, and the project.
func removeProject(t *testing.T, project string) {
	if _, err := incusCLI(t, "project", "show", project); err != nil {
		return
	}
	out, _ := incusCLI(t, "list", "--project", project, "--format", "csv", "-c", "n")
	for _, inst := range strings.Fields(out) {
		incusCLI(t, "delete", "--force", "--project", project, inst)
	}
	// Only a project with images of its own: another one lists the default project's.
	if own, _ := incusCLI(t, "project", "get", project, "features.images"); own == "true" {
		out, _ = incusCLI(t, "image", "list", "--project", project, "--format", "csv", "-c", "F")
		for _, fp := range strings.Fields(out) {
			incusCLI(t, "image", "delete", "--project", project, fp)
		}
	}
	incusCLI(t, "project", "delete", project)
}

// entries is the SPIRE server's registration entries by ID.
func (b *operatorBed) entries(t *testing.T) map[string]spire.Entry {
	t.Helper()
	out := map[string]spire.Entry{}
	for _, e := range b.spire.Entries(t) {
		out[e.ID] = e
	}
	return out
}

// addresses is what Incus reports of a node's global addresses, by family.
func (b *operatorBed) addresses(t *testing.T, node string) (v4, v6 []string) {
	t.Helper()
	out, err := incusCLI(t, "query", "/1.0/instances/"+node+"/state?project="+b.project)
	if err != nil {
		t.Fatalf("incus query state: %v: %s", err, out)
	}
	var st struct {
		Network map[string]struct {
			Addresses []struct{ Family, Address, Scope string }
		}
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	for name, n := range st.Network {
		for _, a := range n.Addresses {
			if name == "lo" || a.Scope != "global" {
				continue
			}
			if a.Family == "inet" {
				v4 = append(v4, a.Address)
			} else {
				v6 = append(v6, a.Address)
			}
		}
	}
	sort.Strings(v4)
	sort.Strings(v6)
	return v4, v6
}

// wantRecords checks the tree's records and the nodes' addresses answer at the
// server.
func (b *operatorBed) wantRecords(t *testing.T) {
	t.Helper()
	for _, c := range []struct {
		name, typ string
		want      []string
	}{
		{"front.test.example.", "A", []string{"192.0.2.100"}},
		{"www.test.example.", "CNAME", []string{"front.test.example."}},
		{"test.example.", "TXT", []string{`"v=spf1 -all"`}},
		{"test.example.", "MX", []string{"10 mail.test.example.", "20 web1.test.example."}},
	} {
		if _, got := b.dns.Query(t, c.name, c.typ); !slices.Equal(got, c.want) {
			t.Errorf("%s %s: %q, want %q", c.name, c.typ, got, c.want)
		}
	}
	for _, node := range []string{"web1", "web2"} {
		v4, v6 := b.addresses(t, node)
		if len(v4) == 0 || len(v6) == 0 {
			t.Errorf("%s: Incus reports no address (%v %v): the closure's address.service did not run", node, v4, v6)
		}
		if _, got := b.dns.Query(t, node+".test.example.", "A"); !slices.Equal(got, v4) {
			t.Errorf("%s A: %q, want %q as Incus reports", node, got, v4)
		}
		if _, got := b.dns.Query(t, node+".test.example.", "AAAA"); !slices.Equal(got, v6) {
			t.Errorf("%s AAAA: %q, want %q as Incus reports", node, got, v6)
		}
	}
}

// wantIdentities checks one entry per application unit with its SPIFFE ID, parent
// and selector, and each node's join token (0600, root) in its instance; it returns
// the tokens.
func (b *operatorBed) wantIdentities(t *testing.T) []string {
	t.Helper()
	got := b.entries(t)
	var tokens []string
	for _, node := range []string{"web1", "web2"} {
		for _, app := range []string{"hello", "mail"} {
			unit := app + ".service"
			e, ok := got[spire.EntryID("web", node, app, unit)]
			if !ok {
				t.Errorf("%s %s: no entry (entries %v)", node, app, got)
				continue
			}
			want := spire.Entry{ID: e.ID, SpiffeID: "spiffe://test.example/web/" + node + "/" + app,
				ParentID: "spiffe://test.example/switchyard/agent/web/" + node, Selectors: []string{"systemd:id:" + unit}}
			if e.SpiffeID != want.SpiffeID || e.ParentID != want.ParentID || !slices.Equal(e.Selectors, want.Selectors) {
				t.Errorf("%s %s: entry %+v, want %+v", node, app, e, want)
			}
		}
		st, err := incusOutput(t, "exec", "--project", b.project, node, "--", "stat", "-c", "%a %u %s", "/var/lib/switchyard/spire/join-token")
		if err != nil || !strings.HasPrefix(st, "600 0 ") || strings.HasSuffix(st, " 0") {
			t.Errorf("%s: join token: %q (%v), want mode 600, root, not empty", node, st, err)
		}
		tok, err := incusOutput(t, "exec", "--project", b.project, node, "--", "cat", "/var/lib/switchyard/spire/join-token")
		if err != nil || tok == "" {
			t.Fatalf("%s: reading the join token: %v", node, err)
		}
		tokens = append(tokens, tok)
	}
	return tokens
}

// nowhere fails when a secret appears in any file under dir or in the outputs.
func nowhere(t *testing.T, secret string, dir string, outputs ...string) {
	t.Helper()
	for i, o := range outputs {
		if strings.Contains(o, secret) {
			t.Errorf("the join token is in output %d", i)
		}
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&os.ModeSymlink != 0 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), secret) {
			t.Errorf("the join token is in %s", p)
		}
		return nil
	})
}

// tf-incus-operator end to end, against bind9 and against knot (issue 12's
// acceptance): the tenant's project, instances in it, records, identities and the
// verdict of the pass after registration; a second apply that changes nothing; a
// record edited by hand put back; a TTL changed in place; DNS_DOMAIN redeploying;
// a wrong TSIG key; destroy, twice.
func TestTFIncusOperator(t *testing.T) {
	t.Parallel()
	for _, kind := range dnsserver.Kinds() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			testOperator(t, kind)
		})
	}
}

func testOperator(t *testing.T, kind string) {
	b := newOperatorBed(t, kind)
	op := func(env []string, args ...string) run {
		t.Helper()
		return switchyard(t, append(append([]string{}, b.env...), env...), append([]string{"tf-incus-operator"}, args...)...)
	}

	// A group that runs no application is refused, naming it, before anything runs.
	r := op(nil, "apply", "--tree", b.tree, "--group", "idle")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "idle") || !strings.Contains(r.stderr, "runs no application") {
		t.Errorf("--group idle: %q", r.stderr)
	}
	r = op(nil, "names", "--tree", b.tree)
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, `"web1"`) || strings.Contains(r.stdout, "idle1") {
		t.Errorf("names: %s", r.stdout)
	}

	// The first apply.
	r = op(nil, "apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	vs := verdicts(t, r)
	for _, node := range []string{"web1", "web2"} {
		v := vs[node]
		if v == nil || v["ok"] != true || v["pass"] != "verdict-only" || v["target"] != "incus "+b.project+"/"+node {
			t.Fatalf("%s: verdict %v\n%s", node, v, strings.Join(logMsgs(r), "\n"))
		}
		// needs-identity.service failed in the deploy's pass (no token yet; checked in
		// the state below); the pass after registration swept it and it runs: the
		// node's verdict is that pass's.
		if f := strs(units(t, v, "failed")); len(f) != 0 {
			t.Errorf("%s: failed units in the node's verdict: %v", node, f)
		}
		if got, _ := incusOutput(t, "exec", "--project", b.project, node, "--", "systemctl", "is-active", "needs-identity.service"); got != "active" {
			t.Errorf("%s: needs-identity.service %q", node, got)
		}
	}
	st := operatorState(t, b)
	for _, node := range []string{"web1", "web2"} {
		first := st[node].Deployment
		if first["exit_code"] != 1.0 || !strings.Contains(fmt.Sprint(first["verdict"]), "needs-identity.service") {
			t.Errorf("%s: the deploy's pass in state: exit %v, verdict %v", node, first["exit_code"], first["verdict"])
		}
		if st[node].Verdict["ok"] != true {
			t.Errorf("%s: the pass after registration in state: %v", node, st[node].Verdict)
		}
	}
	if got := instances(t, b.project); len(got) != 2 || got["web1"] != "RUNNING" || got["web2"] != "RUNNING" {
		t.Errorf("instances in %s: %v", b.project, got)
	}
	if v, _ := incusCLI(t, "project", "get", b.project, "limits.instances"); v != "5" {
		t.Errorf("project %s: limits.instances %q", b.project, v)
	}
	b.wantRecords(t)
	tokens := b.wantIdentities(t)
	for _, tok := range tokens {
		nowhere(t, tok, b.state, r.stdout, r.stderr)
	}
	entries := b.entries(t)
	twoTenants(t, b, entries)

	// Nothing changed: no DNS update, no entry, every node unchanged.
	updates := b.dns.Updates(t)
	r = op(nil, "apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	for node, v := range verdicts(t, r) {
		if v["switch"].(map[string]any)["result"] != "unchanged" {
			t.Errorf("%s: second apply: %v", node, v["switch"])
		}
	}
	if n := b.dns.Updates(t); n != updates {
		t.Errorf("second apply sent %d DNS updates", n-updates)
	}
	if got := b.entries(t); len(got) != len(entries) {
		t.Errorf("second apply: %d entries, had %d", len(got), len(entries))
	}
	r = op(nil, "plan", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	for _, tok := range tokens {
		nowhere(t, tok, b.state, r.stdout, r.stderr)
	}

	// The other verbs: the verdict-only pass reaches the nodes in the tenant's project;
	// refresh reads every resource back; run is OpenTofu on the generated graph.
	r = op(nil, "verdict", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	if vs := verdicts(t, r); len(vs) != 2 || vs["web1"]["target"] != "incus "+b.project+"/web1" {
		t.Errorf("verdict verb: %v", vs)
	}
	r = op(nil, "refresh", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	r = op(nil, "run", "--tree", b.tree, "--", "state", "list")
	wantCode(t, r, 0)
	for _, want := range []string{`switchyard_incus_project.tenant["` + b.project + `"]`, `switchyard_spire_agent.node["web1"]`,
		`switchyard_spire_entry.unit["web2/mail/mail.service"]`, `switchyard_dns_rrset.record["www.test.example. CNAME"]`,
		`switchyard_verdict.node["web2"]`, `switchyard_dns_rrset.node_aaaa["web1"]`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("state list lacks %s:\n%s", want, r.stdout)
		}
	}
	for _, tok := range tokens {
		nowhere(t, tok, b.state, r.stdout, r.stderr)
	}

	// A record edited by hand: plan shows it, apply puts it back.
	b.dns.NSUpdate(t, "update delete front.test.example. A\nupdate add front.test.example. 300 A 192.0.2.99\n")
	r = op(nil, "plan", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	if !anyLog(r, `switchyard_dns_rrset.address["front.test.example. A"]`) {
		t.Errorf("plan does not show the record edited by hand:\n%s", strings.Join(logMsgs(r), "\n"))
	}
	r = op(nil, "apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	if _, got := b.dns.Query(t, "front.test.example.", "A"); !slices.Equal(got, []string{"192.0.2.100"}) {
		t.Errorf("front A after apply: %q", got)
	}

	// A TTL change in place: the RRset never disappears while the apply runs.
	records := operatorRecords["records"].(map[string]any)
	changed := map[string]any{}
	for k, v := range records {
		changed[k] = v
	}
	changed["front"] = map[string]any{"A": []string{"192.0.2.100"}, "ttl": 600}
	writeOperatorTree(t, b, map[string]any{"records": changed})
	stop, gaps := pollRRset(t, b.dns, "front.test.example.", "A")
	r = op(nil, "apply", "--tree", b.tree, "--output", "json")
	polls, missing := stop()
	wantCode(t, r, 0)
	if ttl, got := b.dns.Query(t, "front.test.example.", "A"); ttl != 600 || !slices.Equal(got, []string{"192.0.2.100"}) {
		t.Errorf("front A after the TTL change: ttl %d %q", ttl, got)
	}
	if polls < 10 || missing > 0 {
		t.Errorf("TTL change: %d of %d polls found no RRset (%v)", missing, polls, gaps())
	}

	// DNS_DOMAIN changes the plans: both nodes are planned as changed and redeployed.
	env := []string{"DNS_DOMAIN=" + operatorDomain}
	r = op(env, "plan", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	if p := planEvents(r); !p["web1"] || !p["web2"] {
		t.Errorf("plan with DNS_DOMAIN: %v", p)
	}
	r = op(env, "apply", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	for _, node := range []string{"web1", "web2"} {
		if countLogs(r, node, `switchyard_deployment.node["`+node+`"]: Modifying`) != 1 {
			t.Errorf("%s not redeployed after DNS_DOMAIN changed:\n%s", node, strings.Join(logMsgs(r), "\n"))
		}
	}

	// A wrong TSIG key: exit 3 with the server's answer; nothing changed.
	wrong := filepath.Join(t.TempDir(), "wrong.key")
	os.WriteFile(wrong, []byte("key \""+b.dns.Key.Name+"\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0IHRoYXQgaXMgd3Jvbmcgc2VjcmV0IHRoYXQgaXMgd3Jvbmc=\";\n};\n"), 0o600)
	stateFile := filepath.Join(b.state, "tofu", "state", "switchyard.tfstate")
	before, _ := os.ReadFile(stateFile)
	updates = b.dns.Updates(t)
	writeOperatorTree(t, b, map[string]any{"records": records})
	r = switchyard(t, []string{b.deployment(wrong), b.env[1]}, "tf-incus-operator", "apply", "--tree", b.tree)
	wantCode(t, r, 3)
	if !strings.Contains(r.stderr, "BADSIG") && !strings.Contains(r.stderr, "BADKEY") {
		t.Errorf("wrong key: %q does not name the server's answer", r.stderr)
	}
	if strings.Contains(r.stderr, wrong) {
		t.Errorf("the key file's path is printed: %q", r.stderr)
	}
	if after, _ := os.ReadFile(stateFile); string(after) != string(before) || b.dns.Updates(t) != updates {
		t.Error("a run with a wrong key changed the state or sent an update")
	}

	// destroy: the entries, records, instances and project are gone; again: a no-op.
	r = op(nil, "destroy", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
	for id := range entries {
		if _, ok := b.entries(t)[id]; ok && strings.HasPrefix(id, "switchyard") {
			t.Errorf("entry %s left after destroy", id)
		}
	}
	for _, c := range [][2]string{{"front.test.example.", "A"}, {"www.test.example.", "CNAME"}, {"test.example.", "MX"},
		{"test.example.", "TXT"}, {"web1.test.example.", "A"}, {"web2.test.example.", "AAAA"}} {
		if _, got := b.dns.Query(t, c[0], c[1]); len(got) != 0 {
			t.Errorf("%s %s left after destroy: %q", c[0], c[1], got)
		}
	}
	if _, err := incusCLI(t, "project", "show", b.project); err == nil {
		t.Errorf("project %s left after destroy", b.project)
	}
	r = op(nil, "destroy", "--tree", b.tree, "--output", "json")
	wantCode(t, r, 0)
}

// writeOperatorTree rewrites the tree with other dns.records.
// writeOperatorTree writes the tree: tenant web (web1, web2, its domain the tree's),
// the group idle that runs nothing, and more groups as given.
func writeOperatorTree(t *testing.T, b *operatorBed, dns map[string]any, more ...map[string]any) {
	t.Helper()
	bed := testbed.Require(t)
	groups := map[string]any{"idle": map[string]any{"nodes": map[string]any{"idle1": map[string]any{"incus": map[string]any{"image": bed.Image}}}}}
	for _, m := range more {
		for k, v := range m {
			groups[k] = v
		}
	}
	plantest.WriteTree(t, b.tree, plantest.Tree{
		Nodes:   []plantest.Node{{Name: "web1", Image: bed.Image}, {Name: "web2", Image: bed.Image}},
		Domains: []string{operatorDomain},
		Closure: "tenant-needs-identity",
		DNS:     dns,
		Groups:  groups,
		Methods: b.methods(),
	})
}

// twoTenants is issue 29 item 3's two-tenant case: tenant a (its own group and
// domain) submits naming tenant web's domain, project or trust domain; each is
// refused (exit 2, naming the setting) before anything runs, and web's records,
// entries and project are as they were.
func twoTenants(t *testing.T, b *operatorBed, entries map[string]spire.Entry) {
	t.Helper()
	bed := testbed.Require(t)
	writeOperatorTree(t, b, operatorRecords, map[string]any{"tenant-a": map[string]any{
		"applications": []string{"hello"}, "domains": []string{"a.test"},
		"nodes": map[string]any{"a1": map[string]any{"incus": map[string]any{"image": bed.Image}}},
	}})
	defer writeOperatorTree(t, b, operatorRecords)
	updates := b.dns.Updates(t)
	for _, c := range []struct{ name, setting, reason string }{
		{"web's domain", `"domain":"test.example"`, `deployment-method.tf-incus-operator.domain: "test.example" is not a domain of group tenant-a (groups.tenant-a.domains: a.test)`},
		{"a subdomain of web's", `"domain":"a.test.example"`, `"a.test.example" is not a domain of group tenant-a`},
		{"web's project", fmt.Sprintf(`"domain":"a.test","project":%q`, b.project), "deployment-method.tf-incus-operator.project: set by the tree only"},
		{"web's trust domain", `"domain":"a.test","spireTrustDomain":"test.example"`, "deployment-method.tf-incus-operator.spireTrustDomain: set by the tree only"},
	} {
		sub := fmt.Sprintf(`DEPLOYMENT={"deployment-method":{"tf-incus-operator":{%s,"dnsTsigKeyFile":%q}}}`, c.setting, b.keyFile)
		r := switchyard(t, []string{sub, b.env[1]}, "tf-incus-operator", "apply", "--tree", b.tree, "--group", "tenant-a", "--output", "json")
		if r.code != 2 || !strings.Contains(r.stderr, c.reason) {
			t.Errorf("tenant a naming %s: exit %d, stderr %q; want 2 with %q", c.name, r.code, r.stderr, c.reason)
		}
	}
	if n := b.dns.Updates(t); n != updates {
		t.Errorf("tenant a's refused runs sent %d DNS updates", n-updates)
	}
	b.wantRecords(t)
	got := b.entries(t)
	for id, e := range entries {
		if g, ok := got[id]; !ok || !g.Equal(e) {
			t.Errorf("entry %s after tenant a's runs: %+v, was %+v", id, g, e)
		}
	}
	if len(got) != len(entries) {
		t.Errorf("tenant a's runs: %d entries, had %d", len(got), len(entries))
	}
	if got := instances(t, b.project); len(got) != 2 || got["web1"] != "RUNNING" || got["web2"] != "RUNNING" {
		t.Errorf("instances in %s after tenant a's runs: %v", b.project, got)
	}
}

// pollRRset queries name/typ over TCP until stop is called, counting the answers
// without the RRset.
func pollRRset(t *testing.T, s *dnsserver.Server, name, typ string) (stop func() (polls, missing int), gaps func() []string) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen []string
	polls, missing := 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, recs, err := s.QueryErr(name, typ)
			mu.Lock()
			polls++
			if err != nil || len(recs) == 0 {
				missing++
				seen = append(seen, fmt.Sprintf("%s: %v %v", time.Now().Format(time.StampMilli), recs, err))
			}
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() (int, int) {
			cancel()
			<-done
			mu.Lock()
			defer mu.Unlock()
			return polls, missing
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return seen
		}
}

func anyLog(r run, substr string) bool {
	for _, m := range logMsgs(r) {
		if strings.Contains(m, substr) {
			return true
		}
	}
	return false
}

// nodeResources is a node's deployment and verdict pass as the state holds them.
type nodeResources struct{ Deployment, Verdict map[string]any }

// operatorState reads the state file of the local backend: per node, its
// deployment's and its verdict pass's attributes.
func operatorState(t *testing.T, b *operatorBed) map[string]nodeResources {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.state, "tofu", "state", "switchyard.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Resources []struct {
			Type, Name string
			Instances  []struct {
				IndexKey   any            `json:"index_key"`
				Attributes map[string]any `json:"attributes"`
			}
		}
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	out := map[string]nodeResources{}
	for _, r := range s.Resources {
		for _, i := range r.Instances {
			node, _ := i.IndexKey.(string)
			nr := out[node]
			switch r.Type {
			case "switchyard_deployment":
				nr.Deployment = i.Attributes
			case "switchyard_verdict":
				nr.Verdict = i.Attributes
			}
			out[node] = nr
		}
	}
	return out
}

// spireTokenFile is not read (the server's unix socket needs no credential:
// README): a malformed one changes nothing and is in no output. (With the other
// tests of spire-server here, late in the package's order: testbed/test.sh builds
// spire-server while the first tests run, and a test that waits for it holds one of
// the package's parallel slots.)
func TestCredentialLeakSpireTokenFile(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	t.Parallel()
	sp := spireserver.Start(t, operatorDomain)
	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{
		Nodes:   []plantest.Node{{Name: "web1", Image: bed.Image}},
		Closure: "tenant-needs-identity",
		Methods: map[string]map[string]any{"tf-incus-operator": {"project": "switchyard-test-leak", "spireServer": sp.Addr}},
	})
	for _, c := range []leakCase{
		{"two lines", "MARK\nMARK\n", 0},
		{"a token with spaces", "MARK MARK\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			mark := marker(t)
			file := stageCredential(t, strings.ReplaceAll(c.content, "MARK", mark))
			state := t.TempDir()
			r := switchyard(t, []string{`DEPLOYMENT={"deployment-method":{"tf-incus-operator":{"spireTokenFile":"` + file + `"}}}`},
				"tf-incus-operator", "refresh", "--tree", tree, "--state-dir", state, "--output", "json")
			noLeak(t, r, mark, file, state)
			if r.code != 0 {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}
