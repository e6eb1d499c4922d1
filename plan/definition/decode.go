package definition

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/data"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/plan/tree"
)

// Decode reads a deployment definition from its JSON form (deployment.json, or
// deployment.nix as nix/definition.nix evaluates it) and checks it against the tree.
// source names it in refusals.
func Decode(t *tree.Tree, source string, b []byte) (*Definition, error) {
	v, err := data.ParseData(b)
	if err != nil {
		return nil, field.WithSource(err, source)
	}
	d, err := decode(t, v)
	if err == nil {
		err = d.checkTree(t)
	}
	if err != nil {
		return nil, field.WithSource(err, source)
	}
	d.Tree, d.Source = t, source
	return d, nil
}

func decode(t *tree.Tree, v any) (*Definition, error) {
	top, err := asObject(v, "")
	if err != nil {
		return nil, err
	}
	if err := top.only("domain", "email", "system", "nixpkgs", "applications", "groups", "dns", "deployment-method", "submissions"); err != nil {
		return nil, err
	}
	d := &Definition{}
	if d.Domain, err = top.string("domain", ""); err != nil {
		return nil, err
	}
	if d.Email, err = top.string("email", ""); err != nil {
		return nil, err
	}
	if d.Builder, err = decodeSystem(top); err != nil {
		return nil, err
	}
	if d.Nixpkgs, err = decodeNixpkgs(t, top); err != nil {
		return nil, err
	}
	if d.Applications, err = decodeApplications(top); err != nil {
		return nil, err
	}
	if d.Groups, err = decodeGroups(top, d.Applications); err != nil {
		return nil, err
	}
	if d.MethodSettings, err = decodeMethodSettings(top); err != nil {
		return nil, err
	}
	if d.DNS, err = decodeDNS(top); err != nil {
		return nil, err
	}
	if d.Submissions, err = decodeSubmissions(top, d.Groups); err != nil {
		return nil, err
	}
	return d, nil
}

func decodeSubmissions(top object, groups map[string]Group) (Submissions, error) {
	o, err := top.object("submissions")
	if err != nil {
		return Submissions{}, err
	}
	if err := o.only("allowedSigners", "requireSignature", "credentialDirs", "scopes"); err != nil {
		return Submissions{}, err
	}
	var s Submissions
	if o.has("allowedSigners") {
		if s.AllowedSigners, err = repoPath(o.m["allowedSigners"], o.at.Key("allowedSigners"), "a tree path to an allowed_signers file"); err != nil {
			return Submissions{}, err
		}
	}
	if s.RequireSignature, err = o.bool("requireSignature", false); err != nil {
		return Submissions{}, err
	}
	if s.RequireSignature && s.AllowedSigners == "" {
		return Submissions{}, field.Errorf(o.at.Key("requireSignature"), "requires allowedSigners: the file of who may sign")
	}
	if s.CredentialDirs, err = decodeCredentialDirs(o); err != nil {
		return Submissions{}, err
	}
	if s.Scopes, err = decodeScopes(o, groups); err != nil {
		return Submissions{}, err
	}
	return s, nil
}

// decodeCredentialDirs reads submissions.credentialDirs: absolute paths on the
// deployer, never tree paths (a tree is not where an API stages secrets).
func decodeCredentialDirs(o object) ([]string, error) {
	at := o.at.Key("credentialDirs")
	v, ok := o.m["credentialDirs"]
	if !ok {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, o.wrong("credentialDirs", data.Array)
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, field.Errorf(at.Index(i), "wrong type: %s, want an absolute directory path as a string", data.KindOf(e).Article())
		}
		if !filepath.IsAbs(s) || filepath.Clean(s) == "/" {
			return nil, field.Errorf(at.Index(i), "%q is not an absolute directory below /", s)
		}
		out[i] = filepath.Clean(s)
	}
	return out, nil
}

// decodeScopes reads submissions.scopes: principal to the defined groups it may reach.
func decodeScopes(o object, groups map[string]Group) (map[string][]string, error) {
	if !o.has("scopes") {
		return nil, nil
	}
	sc, err := o.object("scopes")
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, principal := range slices.Sorted(maps.Keys(sc.m)) {
		at := sc.at.Key(principal)
		list, err := sc.strings(principal, nil)
		if err != nil {
			return nil, err
		}
		for i, g := range list {
			if _, ok := groups[g]; !ok {
				return nil, field.Errorf(at.Index(i), "unknown group %q", g)
			}
		}
		out[principal] = list
	}
	return out, nil
}

func decodeSystem(top object) (data.RepoPath, error) {
	v, ok := top.m["system"]
	if !ok || v == NixOS {
		return "", nil
	}
	return repoPath(v, top.at.Key("system"), `"nixos" or a tree path to a builder`)
}

// repoPath reads a tree path written as a string or as a {"_repoPath": ...} object.
func repoPath(v any, at field.Path, want string) (data.RepoPath, error) {
	switch t := v.(type) {
	case data.RepoPath:
		return t, nil
	case string:
		p, err := data.CleanRepoPath(t)
		if err != nil {
			return "", field.Errorf(at, "%v", err)
		}
		return p, nil
	}
	return "", field.Errorf(at, "wrong type: %s, want %s", data.KindOf(v).Article(), want)
}

func decodeNixpkgs(t *tree.Tree, top object) (string, error) {
	at := top.at.Key("nixpkgs")
	switch v := top.m["nixpkgs"].(type) {
	case nil:
		return "", nil
	case data.RepoPath:
		return t.Path(v), nil
	case string:
		if !filepath.IsAbs(v) {
			return "", field.Errorf(at, "%q is not an absolute path (or a path in the tree)", v)
		}
		return filepath.Clean(v), nil
	default:
		return "", field.Errorf(at, "wrong type: %s, want a path", data.KindOf(v).Article())
	}
}

func decodeApplications(top object) (map[string]Application, error) {
	apps, err := top.object("applications")
	if err != nil {
		return nil, err
	}
	out := map[string]Application{}
	for _, name := range slices.Sorted(maps.Keys(apps.m)) {
		at := apps.at.Key(name)
		if err := checkName(at, "application", name); err != nil {
			return nil, err
		}
		o, err := asObject(apps.m[name], at)
		if err != nil {
			return nil, err
		}
		if err := o.only("enable", "module", "settings", "units"); err != nil {
			return nil, err
		}
		var a Application
		if a.Units, err = o.strings("units", []string{name + ".service"}); err != nil {
			return nil, err
		}
		for i, u := range a.Units {
			if !unitName.MatchString(u) {
				return nil, field.Errorf(at.Key("units").Index(i), "%q is not a systemd unit name (e.g. %s.service)", u, name)
			}
			if slices.Index(a.Units, u) != i {
				return nil, field.Errorf(at.Key("units").Index(i), "unit %q listed twice", u)
			}
		}
		if a.Enable, err = o.bool("enable", false); err != nil {
			return nil, err
		}
		if o.has("module") {
			if a.Module, err = repoPath(o.m["module"], at.Key("module"), "a tree path"); err != nil {
				return nil, err
			}
		}
		settings, err := o.object("settings")
		if err != nil {
			return nil, err
		}
		a.Settings = settings.m
		out[name] = a
	}
	return out, nil
}

func decodeGroups(top object, apps map[string]Application) (map[string]Group, error) {
	groups, err := top.object("groups")
	if err != nil {
		return nil, err
	}
	out := map[string]Group{}
	nodeAt := map[string]field.Path{} // node names are unique across groups
	for _, name := range slices.Sorted(maps.Keys(groups.m)) {
		at := groups.at.Key(name)
		if err := checkName(at, "group", name); err != nil {
			return nil, err
		}
		o, err := asObject(groups.m[name], at)
		if err != nil {
			return nil, err
		}
		if err := o.only("applications", "domains", "nodes"); err != nil {
			return nil, err
		}
		var g Group
		if g.Domains, err = decodeDomains(o); err != nil {
			return nil, err
		}
		if g.Applications, err = o.strings("applications", []string{}); err != nil {
			return nil, err
		}
		for i, app := range g.Applications {
			if _, ok := apps[app]; !ok {
				return nil, field.Errorf(at.Key("applications").Index(i), "unknown application %q", app)
			}
			if slices.Index(g.Applications, app) != i {
				return nil, field.Errorf(at.Key("applications").Index(i), "application %q listed twice", app)
			}
		}
		nodes, err := o.object("nodes")
		if err != nil {
			return nil, err
		}
		g.Nodes = map[string]Node{}
		for _, node := range slices.Sorted(maps.Keys(nodes.m)) {
			nat := nodes.at.Key(node)
			if err := checkName(nat, "node", node); err != nil {
				return nil, err
			}
			if prev, dup := nodeAt[node]; dup {
				return nil, field.Errorf(nat, "node %s is already defined at %s: node names are unique across groups", node, prev)
			}
			nodeAt[node] = nat
			if g.Nodes[node], err = decodeNode(nodes.m[node], nat); err != nil {
				return nil, err
			}
		}
		out[name] = g
	}
	return out, nil
}

// domainName is a DNS name of at least two labels, no final dot.
var domainName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$`)

// decodeDomains reads a group's domains (SPEC 6.9), lower-cased.
func decodeDomains(o object) ([]string, error) {
	list, err := o.strings("domains", nil)
	if err != nil {
		return nil, err
	}
	for i, dom := range list {
		if !domainName.MatchString(dom) {
			return nil, field.Errorf(o.at.Key("domains").Index(i), "%q is not a domain name (e.g. tenant.example, no final dot)", dom)
		}
		list[i] = strings.ToLower(dom)
	}
	return list, nil
}

func decodeMethodSettings(top object) (map[string]map[string]any, error) {
	dm, err := top.object("deployment-method")
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(dm.m)) {
		at := dm.at.Key(name)
		m, ok := method.Lookup(name)
		if !ok {
			return nil, field.Errorf(at, "unknown method (one of %s)", strings.Join(method.Names(), ", "))
		}
		o, err := asObject(dm.m[name], at)
		if err != nil {
			return nil, err
		}
		for _, key := range slices.Sorted(maps.Keys(o.m)) {
			if err := m.Check(at.Key(key), key, o.m[key]); err != nil {
				return nil, err
			}
		}
		out[name] = o.m
	}
	return out, nil
}

// unitName is a systemd unit name: a name with a unit type suffix, no path.
var unitName = regexp.MustCompile(`^[A-Za-z0-9:_.@\\-]+\.(service|socket|timer|path|target|mount|scope|slice)$`)

// recordName is a dns.records name: "@" or DNS labels relative to the domain.
var recordName = regexp.MustCompile(`^(@|(\*\.)?[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*)$`)

func decodeDNS(top object) (DNS, error) {
	dns, err := top.object("dns")
	if err != nil {
		return DNS{}, err
	}
	if err := dns.only("records"); err != nil {
		return DNS{}, err
	}
	recs, err := dns.object("records")
	if err != nil {
		return DNS{}, err
	}
	out := DNS{Records: map[string]Record{}}
	for _, name := range slices.Sorted(maps.Keys(recs.m)) {
		at := recs.at.Key(name)
		if !recordName.MatchString(name) || name == "*" {
			return DNS{}, field.Errorf(at, "%q is not a name relative to the domain (\"@\" for the apex)", name)
		}
		o, err := asObject(recs.m[name], at)
		if err != nil {
			return DNS{}, err
		}
		if err := o.only(append([]string{"ttl"}, RecordTypes...)...); err != nil {
			return DNS{}, err
		}
		r := Record{Sets: map[string][]string{}}
		if r.TTL, err = o.integer("ttl", DefaultTTL); err != nil {
			return DNS{}, err
		}
		if r.TTL < 0 || r.TTL > 2147483647 {
			return DNS{}, field.Errorf(at.Key("ttl"), "%d is not a TTL (0 to 2147483647 seconds)", r.TTL)
		}
		for _, typ := range RecordTypes {
			if !o.has(typ) {
				continue
			}
			vals, err := o.strings(typ, nil)
			if err != nil {
				return DNS{}, err
			}
			if len(vals) == 0 {
				return DNS{}, field.Errorf(at.Key(typ), "no values: leave the type out instead")
			}
			r.Sets[typ] = vals
		}
		if _, cname := r.Sets["CNAME"]; cname && (len(r.Sets) > 1 || len(r.Sets["CNAME"]) > 1) {
			return DNS{}, field.Errorf(at.Key("CNAME"), "a CNAME is the name's only record and has one value")
		}
		if _, cname := r.Sets["CNAME"]; cname && name == "@" {
			return DNS{}, field.Errorf(at.Key("CNAME"), "the apex cannot have a CNAME")
		}
		out.Records[name] = r
	}
	return out, nil
}

func intOf(v any) int64 {
	switch t := v.(type) {
	case json.Number:
		i, _ := t.Int64()
		return i
	case int64:
		return t
	case int:
		return int64(t)
	}
	return 0
}
