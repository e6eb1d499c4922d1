package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// The usage texts of SPEC 2: every command, method and verb answers -h/--help (and
// `switchyard help ...`) on stdout with exit 0; a bad invocation gets the same text on
// stderr after its error, with exit 2. Flags are printed from the FlagSets the
// commands parse with, and the DEPLOY_* variables from effects.Variables, so the help
// cannot drift from what is read.

// isHelpArg reports whether arg asks for help, as the flag package understands it.
func isHelpArg(arg string) bool { return arg == "-h" || arg == "--help" || arg == "-help" }

func writeMainUsage(w io.Writer) {
	fmt.Fprint(w, `switchyard deploys NixOS configurations to fleets of nodes and judges, per node, whether it really came up.

usage:
  switchyard deploy [flags]           the deploy body on one node
  switchyard <method> <verb> [flags]  a method over an operator tree
  switchyard help [command [verb]]    this text, or a command's or verb's usage
  switchyard version                  print the version

methods:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range method.All() {
		fmt.Fprintf(tw, "  %s\t%s\n", m.Name, m.Summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Run 'switchyard <command> --help' for a command's flags and verbs.
Exit codes: 0 fine, 1 a verdict failed, 2 refused before anything changed, 3 infrastructure.
`)
}

func writeVersionUsage(w io.Writer) {
	fmt.Fprint(w, "usage: switchyard version\n\nPrint switchyard's version. Takes no flags.\n")
}

func writeDeployUsage(w io.Writer) {
	fmt.Fprint(w, `usage: switchyard deploy [flags]

Run the deploy body on one node: build (or take) a toplevel, copy its closure, switch to it
and judge the node. Give one of --toplevel, --drv or --expr (none with DEPLOY_VERDICT_ONLY=1).
`)
	var f deployFlags
	writeFlags(w, deployFlagSet(&f))
	writeDeployVars(w)
}

func writeMethodUsage(w io.Writer, m method.Method) {
	fmt.Fprintf(w, "usage: switchyard %s <verb> [flags]\n\n%s: %s.\n\nverbs:\n", m.Name, m.Name, m.Summary)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range m.Verbs {
		fmt.Fprintf(tw, "  %s\t%s\n", v, method.VerbSummary(v))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nRun 'switchyard %s <verb> --help' for a verb's flags.\n", m.Name)
}

func writeVerbUsage(w io.Writer, m method.Method, verb string) {
	tail := " [flags]"
	if verb == "run" {
		tail = " [flags] -- <tofu args>"
	}
	if verb == "receipts" {
		tail = " show|verify [flags]"
	}
	if verb == "exec" {
		tail = " [flags] -- <command> [args...]"
	}
	fmt.Fprintf(w, "usage: switchyard %s %s%s\n\n%s %s: %s.\n", m.Name, verb, tail, m.Name, verb, method.VerbSummary(verb))
	var f methodFlags
	writeFlags(w, methodFlagSet(m, verb, &f))
	if verb != "schema" {
		fmt.Fprint(w, "\nenvironment:\n  DEPLOYMENT  the submission (JSON), when --deployment is not given; unset: the tree's own configuration\n")
	}
	if method.VerbDeploys(verb) {
		writeDeployVars(w)
	}
}

// writeFlags lists a FlagSet's flags with their value names and defaults (a zero
// default is left out: the flag's text then says what unset means).
func writeFlags(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, "\nflags:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if name != "" {
			left += " " + name
		}
		switch f.DefValue {
		case "", "0", "false":
		default:
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(tw, "  %s\t%s\n", left, usage)
	})
	fmt.Fprintf(tw, "  -h, --help\t%s\n", "print this usage")
	_ = tw.Flush()
}

const deployVarsHeading = "\nDEPLOY_* variables (SPEC 4.3; unset or empty: the default; a value that does not parse is refused):\n"

// writeDeployVars lists the deploy body's variables from effects.Variables, the table
// effects.ConfigFromEnv reads them by.
func writeDeployVars(w io.Writer) {
	fmt.Fprint(w, deployVarsHeading)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, v := range effects.Variables {
		fmt.Fprintf(tw, "  %s=%s\t%s\n", v.Name, v.Default, v.Description)
	}
	_ = tw.Flush()
}

// runHelp is `switchyard help [command [verb]]` (and `switchyard --help ...`).
func runHelp(topic []string, stdout, stderr io.Writer) int {
	if len(topic) == 0 || (len(topic) == 1 && (topic[0] == "help" || isHelpArg(topic[0]))) {
		writeMainUsage(stdout)
		return exitcode.OK
	}
	switch topic[0] {
	case "deploy", "version":
		if len(topic) > 1 {
			return refuse(stderr, fmt.Sprintf("switchyard help: %s has no verbs", topic[0]), writeMainUsage)
		}
		if topic[0] == "deploy" {
			writeDeployUsage(stdout)
		} else {
			writeVersionUsage(stdout)
		}
		return exitcode.OK
	}
	m, ok := method.Lookup(topic[0])
	if !ok {
		return refuse(stderr, fmt.Sprintf("switchyard help: unknown command %q", topic[0]), writeMainUsage)
	}
	switch len(topic) {
	case 1:
		writeMethodUsage(stdout, m)
		return exitcode.OK
	case 2:
		if !m.HasVerb(topic[1]) {
			return refuse(stderr, fmt.Sprintf("switchyard help %s: unknown verb %q", m.Name, topic[1]),
				func(w io.Writer) { writeMethodUsage(w, m) })
		}
		writeVerbUsage(stdout, m, topic[1])
		return exitcode.OK
	}
	return refuse(stderr, "switchyard help: give at most a command and a verb", writeMainUsage)
}

// refuse prints msg and then the usage on stderr: exit 2 (SPEC 2).
func refuse(stderr io.Writer, msg string, usage func(io.Writer)) int {
	fmt.Fprintln(stderr, msg)
	fmt.Fprintln(stderr)
	usage(stderr)
	return exitcode.Refused
}

// methodArgs reads `switchyard <method> <verb> [flags]`'s verb and flags. done is set
// when the command line is answered here: help (exit 0) or a bad verb or flag (exit 2).
func methodArgs(m method.Method, args []string, stdout, stderr io.Writer) (verb string, f methodFlags, code int, done bool) {
	methodUsage := func(w io.Writer) { writeMethodUsage(w, m) }
	if len(args) == 0 {
		return "", f, refuse(stderr, fmt.Sprintf("switchyard %s: give a verb: %s", m.Name, strings.Join(m.Verbs, ", ")), methodUsage), true
	}
	verb = args[0]
	if isHelpArg(verb) || verb == "help" {
		return "", f, runHelp(append([]string{m.Name}, args[1:]...), stdout, stderr), true
	}
	if !m.HasVerb(verb) {
		return "", f, refuse(stderr, fmt.Sprintf("switchyard %s: unknown verb %q (want one of %s)", m.Name, verb, strings.Join(m.Verbs, ", ")), methodUsage), true
	}
	f, err := parseMethodFlags(m, verb, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		writeVerbUsage(stdout, m, verb)
		return verb, f, exitcode.OK, true
	}
	if err != nil {
		return verb, f, refuse(stderr, fmt.Sprintf("switchyard %s %s: %v", m.Name, verb, err),
			func(w io.Writer) { writeVerbUsage(w, m, verb) }), true
	}
	return verb, f, exitcode.OK, false
}
