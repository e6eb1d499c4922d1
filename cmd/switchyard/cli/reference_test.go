package cli

import (
	"bytes"
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/commands.md from the usage texts")

// docs/commands.md is the commands' help, generated; it fails on any change to a flag,
// a verb or a variable until rewritten with -update.
func TestReference(t *testing.T) {
	const path = "../../../docs/commands.md"
	var b bytes.Buffer
	WriteReference(&b)
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cmd/switchyard/cli -run TestReference -update writes it)", err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Errorf("%s differs from the commands' usage texts: go test ./cmd/switchyard/cli -run TestReference -update", path)
	}
}
