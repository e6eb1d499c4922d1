// Package cli is the switchyard command line: verbs, flags and exit codes (SPEC 2).
package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// Version is set at link time (-ldflags "-X .../cli.Version=v1.2.3"); otherwise it is
// taken from the module's build information.
var Version = ""

// Main runs the command line and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return refuse(stderr, "switchyard: give a command", writeMainUsage)
	}
	switch cmd := args[0]; {
	case cmd == "help" || isHelpArg(cmd):
		return runHelp(args[1:], stdout, stderr)
	case cmd == "version":
		if len(args) == 2 && isHelpArg(args[1]) {
			writeVersionUsage(stdout)
			return exitcode.OK
		}
		if len(args) != 1 {
			return refuse(stderr, "switchyard version: takes no arguments", writeVersionUsage)
		}
		fmt.Fprintf(stdout, "switchyard %s\n", version())
		return exitcode.OK
	case cmd == "deploy":
		return runDeploy(args[1:], stdout, stderr, os.Getenv)
	default:
		if m, ok := method.Lookup(cmd); ok {
			return runMethod(m, args[1:], env{getenv: os.Getenv, stdin: os.Stdin, stdout: stdout, stderr: stderr})
		}
		return refuse(stderr, fmt.Sprintf("switchyard: unknown command %q", cmd), writeMainUsage)
	}
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
