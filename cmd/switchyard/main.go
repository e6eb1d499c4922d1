// Command switchyard deploys NixOS configurations to fleets of nodes and judges,
// per node, whether it really came up.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/switchyard-nix/switchyard/cmd/switchyard/cli"
	"github.com/switchyard-nix/switchyard/provider"
)

func main() {
	// OpenTofu starts its plugins with the magic cookie set: then this binary is
	// switchyard's provider (SPEC 7), installed for tofu by the tf method.
	if provider.IsPlugin() {
		if err := provider.Serve(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "switchyard provider:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
