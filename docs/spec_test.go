package docs

import (
	"bytes"
	"os"
	"testing"
)

// docs/SPEC.md is the product contract the code cites ("SPEC 4.6"), kept in the
// repository so those citations resolve; where the shared original sits beside the
// checkout (../shared/SPEC.md), the copy must be the same text.
func TestSpecCopy(t *testing.T) {
	copied, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	original, err := os.ReadFile("../../shared/SPEC.md")
	if err != nil {
		t.Skipf("no shared SPEC beside the checkout: %v", err)
	}
	if !bytes.Equal(copied, original) {
		t.Error("docs/SPEC.md differs from ../shared/SPEC.md: copy the shared one over it")
	}
}
