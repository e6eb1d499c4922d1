package shell_test

import (
	"strconv"
	"testing"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/shell"
	"github.com/switchyard-nix/switchyard/transports/transporttest"
)

// TestConformance runs the transport conformance suite through the hooks of
// testdata/ssh-hooks.sh (ssh(1) and nix-copy-closure) to a test-bed node.
func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, node *testbed.Node) effects.Transport {
		tr, err := shell.New(shell.Config{
			Hooks: "testdata/ssh-hooks.sh",
			Env: []string{"SY_PORT=" + strconv.Itoa(node.SSHPort), "SY_KEY=" + node.KeyFile,
				"SY_KNOWN_HOSTS=" + node.KnownHosts},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	})
}
