// Package nix holds switchyard's Nix library, embedded in the binary:
//
//   - lib.nix: the plan reader (readPlan: plan.json with every {"_repoPath": ...} mapped
//     back into the operator tree); the flake's `lib`
//   - module.nix: the NixOS module (switchyard.plan, switchyard.chain)
//   - guest-api.nix: the NixOS module reading run-time values from the Incus guest API
//   - build.nix: a node's toplevel from its generated files and the deployment's `system`
//   - definition.nix: deployment.nix evaluated to data
//
// The method programs write lib.nix, module.nix, guest-api.nix and build.nix under the
// state dir (<state-dir>/nix/), where every generated configuration.nix finds them.
package nix

import (
	"embed"
	"sort"
)

//go:embed *.nix
var files embed.FS

// Library is the files written under <state-dir>/nix/, in the order they are hashed
// into nixos_conf.
var Library = []string{"build.nix", "guest-api.nix", "lib.nix", "module.nix"}

// File is the bytes of one of the embedded Nix files; it panics on a name not embedded.
func File(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("switchyard/nix: no embedded file " + name)
	}
	return b
}

// Names is every embedded Nix file, sorted.
func Names() []string {
	entries, _ := files.ReadDir(".")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// Definition is the source of definition.nix, for `nix-instantiate --expr`.
func Definition() string { return string(File("definition.nix")) }
