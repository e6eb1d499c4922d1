package incus_test

import (
	"testing"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus"
	"github.com/switchyard-nix/switchyard/transports/transporttest"
)

// TestConformance runs the transport conformance suite over the Incus API to a test-bed node.
func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, node *testbed.Node) effects.Transport {
		tr, err := incus.New(incus.Config{Instance: node.Name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	})
}
