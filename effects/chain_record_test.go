package effects

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/verdict"
)

// recordChain re-records testdata/chain-oneshot/ from a live test-bed node:
//
//	SWITCHYARD_TESTBED=require go test ./effects -run TestRecordChain -record-chain
var recordChain = flag.Bool("record-chain", false, "record testdata/chain-oneshot/ from a live test-bed node")

// TestRecordChain switches a node to the chain-oneshot closure (its head is a plain
// oneshot) and keeps one unedited verdict.ReadScript sample of it.
func TestRecordChain(t *testing.T) {
	if !*recordChain {
		t.Skip("run with -record-chain to re-record testdata/chain-oneshot from a test-bed node")
	}
	bed := testbed.Require(t)
	top := bed.Build(t, "chain-oneshot", "")
	node := bed.Node(t)
	node.CopyClosure(t, top)
	if code := node.Switch(t, top, "switch"); code != 0 {
		t.Fatalf("switch exited %d", code)
	}
	out := node.MustExec(t, "sh", "-c", verdict.ReadScript, "sh", verdict.AllUnits)
	dir := filepath.Join("testdata", "chain-oneshot")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sample.txt"), []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
