package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/switchyard-nix/switchyard/methods"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// methodFlags are the common flags of `switchyard <method> <verb>` (SPEC 2).
type methodFlags struct {
	tree, group, deployment, output, stateDir, planIn, planOut string
	nodes                                                      multiFlag
	parallel                                                   int
	tofuArgs                                                   []string // run -- <args>
	offline                                                    bool
}

func parseMethodFlags(verb string, args []string) (methodFlags, error) {
	var f methodFlags
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.tree, "tree", ".", "operator tree")
	fs.StringVar(&f.group, "group", "", "group")
	fs.Var(&f.nodes, "node", "node (repeatable)")
	fs.StringVar(&f.deployment, "deployment", "", "DEPLOYMENT submission file, or - for stdin")
	fs.StringVar(&f.output, "output", "text", "text|json")
	fs.IntVar(&f.parallel, "parallel", 0, "nodes at once (default: the method's parallel setting, 8)")
	fs.StringVar(&f.stateDir, "state-dir", "", "state dir (default <tree>/.switchyard)")
	if verb == "plan" {
		fs.StringVar(&f.planOut, "out", "", "save the plan to FILE")
		fs.BoolVar(&f.offline, "offline", false, "plan without contacting any node")
	}
	if verb == "apply" {
		fs.StringVar(&f.planIn, "plan", "", "deploy exactly the plan saved in FILE")
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if verb == "run" {
		f.tofuArgs = fs.Args()
		if len(f.tofuArgs) == 0 {
			return f, fmt.Errorf("give OpenTofu's arguments after --, e.g. run -- state list")
		}
	} else if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.output != "text" && f.output != "json" {
		return f, fmt.Errorf("--output: %q is not text or json", f.output)
	}
	if f.parallel < 0 {
		return f, fmt.Errorf("--parallel: %d is not a number of nodes", f.parallel)
	}
	abs, err := filepath.Abs(f.tree)
	if err != nil {
		return f, fmt.Errorf("--tree: %w", err)
	}
	f.tree = abs
	if f.stateDir == "" {
		f.stateDir = plan.DefaultStateDir(f.tree)
	}
	return f, nil
}

// env is what a method run reads from its process: the environment and stdin.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// runMethod is `switchyard <method> <verb>`.
func runMethod(name string, args []string, e env) int {
	m, ok := method.Lookup(name)
	if !ok {
		fmt.Fprintf(e.stderr, "switchyard: unknown method %q\n", name)
		return ExitRefused
	}
	if len(args) == 0 {
		fmt.Fprintf(e.stderr, "switchyard %s: give a verb: %s\n", name, strings.Join(m.Verbs, ", "))
		return ExitRefused
	}
	verb := args[0]
	if !m.HasVerb(verb) {
		fmt.Fprintf(e.stderr, "switchyard %s: unknown verb %q (want one of %s)\n", name, verb, strings.Join(m.Verbs, ", "))
		return ExitRefused
	}
	f, err := parseMethodFlags(verb, args[1:])
	if err != nil {
		fmt.Fprintf(e.stderr, "switchyard %s %s: %v\n", name, verb, err)
		return ExitRefused
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	req := methods.Request{Method: name, Verb: verb, Tree: f.tree, Group: f.group, Nodes: f.nodes,
		StateDir: f.stateDir, Parallel: f.parallel, PlanIn: f.planIn, PlanOut: f.planOut, TofuArgs: f.tofuArgs,
		Offline: f.offline, Getenv: e.getenv, Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr, JSON: f.output == "json"}
	var out Output = newTextOutput(e.stdout, e.stderr)
	if req.JSON {
		out = newJSONOutput(e.stdout)
	}
	code := ExitOK
	if verb != "schema" {
		req.Deployment, err = submission(f.deployment, e)
	}
	if err == nil {
		code, err = methods.Run(ctx, req, out)
	} else if code = ExitInfra; errors.Is(err, methods.ErrRefused) {
		code = ExitRefused
	}
	if err != nil {
		msg := fmt.Sprintf("switchyard %s %s: %s", name, verb, strings.ReplaceAll(err.Error(), "\n", " "))
		fmt.Fprintln(e.stderr, msg)
		if req.JSON && verb != "names" && verb != "schema" {
			// JSON readers still get a log event and the closing summary.
			out.Log("", "error", msg)
			out.Summary(0, 0, 0, code)
		}
	}
	return code
}

// submission reads the DEPLOYMENT bytes: --deployment FILE or - (stdin), else the
// DEPLOYMENT variable; none at all means the baked configuration.
func submission(file string, e env) ([]byte, error) {
	switch file {
	case "":
		return []byte(e.getenv("DEPLOYMENT")), nil
	case "-":
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return nil, fmt.Errorf("--deployment: reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--deployment: %w: %w", errors.Unwrap(err), methods.ErrRefused)
	}
	return b, nil
}
