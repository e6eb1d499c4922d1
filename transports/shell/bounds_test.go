package shell_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/shell"
	"github.com/switchyard-nix/switchyard/transports/transporttest"
)

// TestNodeAnswerBounds runs SPEC 6.9's bounds on a node's answers through the
// hooks of testdata/ssh-hooks.sh: a readlink answering 200 MB, and one that never
// answers.
func TestNodeAnswerBounds(t *testing.T) {
	transporttest.Bounds(t, func(t *testing.T, node *testbed.Node, commandTimeout time.Duration) effects.Transport {
		tr, err := shell.New(shell.Config{
			Hooks: "testdata/ssh-hooks.sh",
			Env: []string{"SY_PORT=" + strconv.Itoa(node.SSHPort), "SY_KEY=" + node.KeyFile,
				"SY_KNOWN_HOSTS=" + node.KnownHosts},
			CommandTimeout: commandTimeout,
		})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	})
}
