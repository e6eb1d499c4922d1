package ssh_test

import (
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/ssh"
	"github.com/switchyard-nix/switchyard/transports/transporttest"
)

// TestNodeAnswerBounds runs SPEC 6.9's bounds on a node's answers over SSH: a
// readlink answering 200 MB, and one that never answers.
func TestNodeAnswerBounds(t *testing.T) {
	transporttest.Bounds(t, func(t *testing.T, node *testbed.Node, commandTimeout time.Duration) effects.Transport {
		return nodeTransport(t, node, func(c *ssh.Config) {
			c.SSHConfigFile = ssh.NoSSHConfig
			c.CommandTimeout = commandTimeout
		})
	})
}
