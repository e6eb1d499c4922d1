package methods

import (
	"fmt"
	"strings"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/merge"
)

// checkDomain binds a submitted domain to the run's groups (SPEC 6.9): each group's
// domains must list it or a parent of it; a group without domains keeps the tree's
// domain. Records, identities and projects follow from the domain, so a tenant that
// named another's would write into it.
func checkDomain(def *definition.Definition, d *merge.Deployment, groups []string) error {
	if !d.DomainSubmitted {
		return nil
	}
	domain := canonicalDomain(d.Domain)
	at := field.Path("").Key("deployment-method").Key(d.Method.Name).Key("domain")
	for _, g := range groups {
		allowed := def.Groups[g].Domains
		if len(allowed) == 0 {
			if domain != canonicalDomain(def.Domain) {
				return &field.Error{Source: "DEPLOYMENT", Path: at, Reason: fmt.Sprintf(
					"%q: group %s lists no domains (groups.%s.domains), so a submission keeps the tree's domain", d.Domain, g, g)}
			}
			continue
		}
		if !withinAny(domain, allowed) {
			return &field.Error{Source: "DEPLOYMENT", Path: at, Reason: fmt.Sprintf(
				"%q is not a domain of group %s (groups.%s.domains: %s)", d.Domain, g, g, strings.Join(allowed, ", "))}
		}
	}
	return nil
}

// withinAny: domain is one of allowed or a subdomain of one, label by label.
func withinAny(domain string, allowed []string) bool {
	for _, a := range allowed {
		a = canonicalDomain(a)
		if domain == a || strings.HasSuffix(domain, "."+a) {
			return true
		}
	}
	return false
}

// canonicalDomain is a domain lower-cased, without its root dot.
func canonicalDomain(s string) string {
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
}
