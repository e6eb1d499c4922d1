package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/switchyard-nix/switchyard/nix"
	"github.com/switchyard-nix/switchyard/plan/tree"
)

// NixosConf is a node's configuration identity (SPEC 6.4): SHA-256, hex, over
//
//   - plan.json's canonical bytes (which hold the coordinates, never a credential),
//   - the generated configuration.nix,
//   - the content of every tree file the node reads (tree.Files: its modules, its
//     enabled applications' modules, the builder named by `system`, the tree paths in its
//     plan, and what their relative path literals reach, transitively), each with its
//     path and kind,
//   - what builds it: the deployment's `system` and `nixpkgs`, and switchyard's Nix
//     library (nix/build.nix, lib.nix, module.nix, guest-api.nix) the configuration
//     imports,
//
// each framed with its name and length, so no two different inputs hash alike. Nothing
// else goes in: not the tree's or the state dir's location, not credential paths, not
// the time.
func NixosConf(planJSON, configuration []byte, files []tree.File, system, nixpkgs string) string {
	h := sha256.New()
	h.Write([]byte("switchyard nixos_conf v1\n"))
	section(h, PlanFile, planJSON)
	section(h, ConfigurationFile, configuration)
	section(h, "system", []byte(system))
	section(h, "nixpkgs", []byte(nixpkgs))
	for _, name := range nix.Library {
		section(h, "nix/"+name, nix.File(name))
	}
	for _, f := range files {
		section(h, f.Kind+" "+f.Path, f.Content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func section(h hash.Hash, name string, content []byte) {
	fmt.Fprintf(h, "%d:%s%d:", len(name), name, len(content))
	h.Write(content)
}
