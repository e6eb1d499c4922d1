package method

import (
	"github.com/switchyard-nix/switchyard/plan/settings"
)

// Setting is one method setting.
type Setting struct {
	Name        string
	Type        settings.Type
	Description string
	Default     any // data (nil, bool, string, int, ...)
	Kind        Kind
}

// Kind is who may set a setting (SPEC 6.9): a submission comes from an API that
// tenants drive, so it may choose a configuration, never the deployer's trust.
type Kind int

const (
	// Form settings are submittable: how the configuration is deployed.
	Form Kind = iota
	// Anchor settings are set by the tree only: what vouches for a node or holds the
	// deployer's state and endpoints (a known_hosts file, a state backend, a server).
	Anchor
	// Credential settings are a path to a secret (a key file, a token file): a per-run
	// value that never enters a plan, a saved plan, nixos_conf or any output. A
	// submission may name one only under a credential directory.
	Credential
)

// String is the kind as SPEC 6.9 names it.
func (k Kind) String() string {
	switch k {
	case Anchor:
		return "anchor"
	case Credential:
		return "credential"
	}
	return "form"
}

// Credential reports whether the setting is a credential.
func (s Setting) Credential() bool { return s.Kind == Credential }

func str(name, def, desc string) Setting {
	return Setting{Name: name, Type: settings.Type{Kind: "string"}, Default: def, Description: desc}
}

func credential(name, desc string) Setting {
	s := str(name, "", desc)
	s.Kind = Credential
	return s
}

// anchor marks a setting as the tree's only.
func anchor(s Setting) Setting {
	s.Kind = Anchor
	return s
}

func enum(name, def, desc string, values ...string) Setting {
	s := str(name, def, desc)
	s.Type.Enum = values
	return s
}

func integer(name string, def, minimum int64, desc string) Setting {
	return Setting{Name: name, Type: settings.Type{Kind: "integer", Minimum: &minimum}, Default: def, Description: desc}
}

// object is an object setting of any keys, default {}.
func object(name, desc string) Setting {
	return Setting{Name: name, Type: settings.Type{Kind: "object"}, Default: map[string]any{}, Description: desc}
}
