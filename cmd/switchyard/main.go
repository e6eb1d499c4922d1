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
	code := cli.Main(os.Args[1:], os.Stdout, os.Stderr)
	atExit()
	os.Exit(code)
}

// atExit runs before the exit: nothing, except in the bench's profiling build
// (profile_bench.go).
var atExit = func() {}
