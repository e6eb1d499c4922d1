// Command spire-catalog leaves out of a SPIRE source tree's server catalog every
// built-in plugin the test bed does not configure, so testbed/setup.sh builds the same
// spire-server without the cloud and Kubernetes SDKs those plugins import (about half
// the packages of the build, and most of its time).
//
//	go run ./testbed/cmd/spire-catalog DIR
//
// DIR is a writable copy of SPIRE's pkg/server/catalog. A configuration naming a plugin
// left out fails at the server's start with SPIRE's own "no built-in plugin" error.
package main

import (
	"fmt"
	"os"

	"github.com/switchyard-nix/switchyard/testbed/spirecatalog"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: spire-catalog DIR")
		os.Exit(2)
	}
	dropped, err := spirecatalog.PruneDir(os.Args[1], spirecatalog.Kept)
	if err != nil {
		fmt.Fprintln(os.Stderr, "spire-catalog:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "spire-catalog: left out %d built-in plugins: %v\n", len(dropped), dropped)
}
