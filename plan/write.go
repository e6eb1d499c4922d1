package plan

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/switchyard-nix/switchyard/nix"
)

// Write writes switchyard's Nix library under <state-dir>/nix/ and each node's plan.json
// and configuration.nix under <state-dir>/nodes/<node>/. A file whose content is
// unchanged is left alone; a changed one is replaced atomically.
func (p *Plan) Write() error {
	if err := WriteLibrary(p.StateDir); err != nil {
		return err
	}
	for _, n := range p.Nodes {
		if err := n.Write(); err != nil {
			return err
		}
	}
	return nil
}

// Write writes the node's plan.json and configuration.nix (not the library: Plan.Write).
func (n *Node) Write() error {
	if err := writeFile(filepath.Join(n.Dir, PlanFile), n.PlanJSON); err != nil {
		return err
	}
	return writeFile(filepath.Join(n.Dir, ConfigurationFile), n.Configuration)
}

// WriteLibrary writes switchyard's Nix library (nix.Library) under <state-dir>/nix/.
func WriteLibrary(stateDir string) error {
	for _, name := range nix.Library {
		if err := writeFile(filepath.Join(stateDir, "nix", name), nix.File(name)); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
