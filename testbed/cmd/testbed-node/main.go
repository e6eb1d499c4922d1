// Command testbed-node launches and deletes throwaway test-bed nodes for scripts
// (the README's main job, the benchmark):
//
//	testbed-node launch LABEL DIR   # prints the node as JSON; known_hosts goes to DIR
//	testbed-node delete NAME
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	switch {
	case len(args) == 3 && args[0] == "launch":
		bed, err := testbed.Open()
		if err != nil {
			fmt.Fprintln(os.Stderr, "testbed-node:", err)
			return 3
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		n, err := bed.Launch(ctx, args[1], args[2])
		if err != nil {
			if n != nil {
				n.Delete()
			}
			fmt.Fprintln(os.Stderr, "testbed-node:", err)
			return 3
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{
			"name": n.Name, "ssh_port": n.SSHPort, "known_hosts": n.KnownHosts,
			"key_file": n.KeyFile, "host_key": n.HostKey,
			"target": fmt.Sprintf("root@127.0.0.1:%d", n.SSHPort),
		})
		return 0
	case len(args) == 2 && args[0] == "delete":
		(&testbed.Node{Name: args[1]}).Delete()
		return 0
	default:
		fmt.Fprintln(os.Stderr, "usage: testbed-node launch LABEL DIR | testbed-node delete NAME")
		return 2
	}
}
