package merge

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"

	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// Deployment is the merged deployment one run of a method deploys.
type Deployment struct {
	Definition *definition.Definition // the baked definition: tree, system, nixpkgs, groups
	Method     method.Method

	Domain string
	// DomainSubmitted says the submission set domain: the group's domains must allow
	// it (SPEC 6.9).
	DomainSubmitted bool
	Email           string
	Applications    map[string]definition.Application // every application, merged
	// Settings is the method's settings: defaults, then deployment-method.<method> of the
	// definition, then the submission. Credentials included: use Public for anything
	// saved or shown.
	Settings map[string]any
	// Hash is the deployment_hash: SHA-256 (hex) of the exact DEPLOYMENT bytes (of no
	// bytes when none was given).
	Hash string

	opt Options // how the submission was confined
}

// Hash is the deployment_hash of DEPLOYMENT bytes: SHA-256, hex.
func Hash(deployment []byte) string {
	sum := sha256.Sum256(deployment)
	return hex.EncodeToString(sum[:])
}

// PublicSettings is the method settings without credentials.
func (d *Deployment) PublicSettings() map[string]any { return d.Method.Public(d.Settings) }

// Public is the merged deployment as data without credentials, for a saved plan
// (plan --out) or output: method, domain, email, applications (name to enable and
// settings), settings (credentials removed) and deployment_hash.
func (d *Deployment) Public() map[string]any {
	apps := make(map[string]any, len(d.Applications))
	for name, a := range d.Applications {
		apps[name] = map[string]any{"enable": a.Enable, "settings": a.Settings}
	}
	return map[string]any{
		"method":          d.Method.Name,
		"domain":          d.Domain,
		"email":           d.Email,
		"applications":    apps,
		"settings":        d.PublicSettings(),
		"deployment_hash": d.Hash,
	}
}

// Disabled is the names of the applications that are off, sorted.
func (d *Deployment) Disabled() []string {
	out := []string{}
	for _, name := range slices.Sorted(maps.Keys(d.Applications)) {
		if !d.Applications[name].Enable {
			out = append(out, name)
		}
	}
	return out
}
