// Command switchyard deploys NixOS configurations to fleets of nodes and judges,
// per node, whether it really came up.
package main

import (
	"os"

	"github.com/switchyard-nix/switchyard/cmd/switchyard/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
