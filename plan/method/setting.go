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
	// Credential marks a path to a secret (a key file, a token file): a per-run value that
	// never enters a plan, a saved plan, nixos_conf or any output.
	Credential bool
}

func str(name, def, desc string) Setting {
	return Setting{Name: name, Type: settings.Type{Kind: "string"}, Default: def, Description: desc}
}

func credential(name, desc string) Setting {
	s := str(name, "", desc)
	s.Credential = true
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
