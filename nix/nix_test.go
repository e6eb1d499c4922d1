package nix

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every .nix file of this directory is embedded, and the library is among them.
func TestEmbedded(t *testing.T) {
	onDisk, _ := filepath.Glob("*.nix")
	if !slices.Equal(onDisk, Names()) {
		t.Errorf("embedded %v, on disk %v", Names(), onDisk)
	}
	for _, name := range Library {
		disk, err := os.ReadFile(name)
		if err != nil || string(disk) != string(File(name)) {
			t.Errorf("%s: embedded copy differs from the file (%v)", name, err)
		}
	}
	if !strings.Contains(Definition(), "{ tree }:") {
		t.Error("Definition is not definition.nix")
	}
	defer func() {
		if recover() == nil {
			t.Error("File of a missing name did not panic")
		}
	}()
	File("nope.nix")
}
