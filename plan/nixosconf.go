package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"

	"github.com/switchyard-nix/switchyard/nix"
	"github.com/switchyard-nix/switchyard/plan/tree"
)

// NixosConf is a node's configuration identity (SPEC 6.4): SHA-256, hex, over
//
//   - plan.json's canonical bytes (which hold the coordinates, never a credential),
//   - the generated configuration.nix,
//   - the tree's content, TreeDigest: every file of the tree but the state dir and
//     version control, since a module can read any of them without naming it,
//   - what builds it: the deployment's `system`, nixpkgs by its content (NixpkgsInput),
//     and switchyard's Nix library (nix/build.nix, lib.nix, module.nix, guest-api.nix)
//     the configuration imports,
//
// each framed with its name and length, so no two different inputs hash alike. Nothing
// else goes in: not the tree's or the state dir's location, not credential paths, not
// the time. The environment is no input: the evaluation runs without it (EvalEnv).
func NixosConf(planJSON, configuration []byte, treeDigest, system, nixpkgs string) string {
	h := sha256.New()
	h.Write([]byte("switchyard nixos_conf v2\n"))
	section(h, PlanFile, planJSON)
	section(h, ConfigurationFile, configuration)
	section(h, "tree", []byte(treeDigest))
	section(h, "system", []byte(system))
	section(h, "nixpkgs", []byte(nixpkgs))
	for _, name := range nix.Library {
		section(h, "nix/"+name, nix.File(name))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TreeDigest is the SHA-256, hex, of the tree's files (tree.Files), each with its path,
// kind and content.
func TreeDigest(files []tree.File) string {
	h := sha256.New()
	for _, f := range files {
		section(h, f.Kind+" "+f.Path, f.Content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// NixpkgsInput is what nixos_conf holds of the deployment's nixpkgs (an absolute path,
// or ""): inside the tree, its path relative to the tree (TreeDigest covers its files);
// elsewhere, tree.Content: the store path it resolves to, or the SHA-256 of its files,
// never the path string, which stays the same when a checkout or a channel link moves.
func NixpkgsInput(t *tree.Tree, nixpkgs string) (string, error) {
	if nixpkgs == "" {
		return "", nil
	}
	if rel, ok := t.Contains(nixpkgs); ok {
		return "tree " + rel, nil
	}
	id, err := tree.Content(nixpkgs)
	if errors.Is(err, fs.ErrNotExist) {
		return "missing", nil // its evaluation fails; nothing to cover
	}
	if err != nil {
		return "", fmt.Errorf("nixpkgs: %w", err)
	}
	return id, nil
}

func section(h hash.Hash, name string, content []byte) {
	fmt.Fprintf(h, "%d:%s%d:", len(name), name, len(content))
	h.Write(content)
}
