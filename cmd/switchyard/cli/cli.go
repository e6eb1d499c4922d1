// Package cli is the switchyard command line: verbs, flags and exit codes (SPEC 2).
package cli

import (
	"fmt"
	"io"
	"os"
	"runtime/debug"
)

// Exit codes of SPEC 2.1.
const (
	ExitOK      = 0
	ExitVerdict = 1
	ExitRefused = 2
	ExitInfra   = 3
)

// Version is set at link time (-ldflags "-X .../cli.Version=v1.2.3"); otherwise it is
// taken from the module's build information.
var Version = ""

// Main runs the command line and returns its exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return ExitRefused
	}
	switch args[0] {
	case "version":
		if len(args) != 1 {
			fmt.Fprintln(stderr, "switchyard: version: takes no arguments")
			return ExitRefused
		}
		fmt.Fprintf(stdout, "switchyard %s\n", version())
		return ExitOK
	case "deploy":
		return runDeploy(args[1:], stdout, stderr, os.Getenv)
	case "ssh", "tf", "tf-incus", "tf-incus-operator":
		return runMethod(args[0], args[1:], env{getenv: os.Getenv, stdin: os.Stdin, stdout: stdout, stderr: stderr})
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return ExitOK
	default:
		fmt.Fprintf(stderr, "switchyard: unknown command %q\n%s\n", args[0], usage)
		return ExitRefused
	}
}

const usage = `usage:
  switchyard deploy [flags]           the deploy body on one node
  switchyard <method> <verb> [flags]  a method (ssh, tf, tf-incus, tf-incus-operator) over an operator tree
  switchyard version`

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
