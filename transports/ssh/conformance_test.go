package ssh_test

import (
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/ssh"
	"github.com/switchyard-nix/switchyard/transports/transporttest"
)

// TestConformance runs the transport conformance suite over SSH to a test-bed node.
func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, node *testbed.Node) effects.Transport {
		tr, err := ssh.New(ssh.Config{
			Host:           "127.0.0.1",
			Port:           node.SSHPort,
			SSHConfigFile:  ssh.NoSSHConfig,
			KnownHostsFile: node.KnownHosts,
			KeyFiles:       []string{node.KeyFile},
			DialTimeout:    20 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	})
}
