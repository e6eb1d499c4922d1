package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/coordinates"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// methodFlags are the common flags of `switchyard <method> <verb>` (SPEC 2).
type methodFlags struct {
	tree, group, deployment, output, stateDir, planIn, planOut string
	nodes                                                      multiFlag
	parallel                                                   int
	tofuArgs                                                   []string // run -- <args>
}

// methodFlagSet declares a verb's flags into f; the usage text prints the same set.
func methodFlagSet(verb string, f *methodFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.tree, "tree", ".", "the operator tree `DIR`")
	fs.StringVar(&f.group, "group", "", "only the group `NAME`")
	fs.Var(&f.nodes, "node", "only the node `NAME` (repeatable)")
	fs.StringVar(&f.deployment, "deployment", "", "DEPLOYMENT submission `FILE`, or - for stdin (default: the DEPLOYMENT variable)")
	fs.StringVar(&f.output, "output", "text", "`FORMAT`: text or json")
	fs.IntVar(&f.parallel, "parallel", 0, "how many nodes at once, `N` (default: the method's parallel setting, 8)")
	fs.StringVar(&f.stateDir, "state-dir", "", "the state `DIR` (default: <tree>/.switchyard)")
	if verb == "plan" {
		fs.StringVar(&f.planOut, "out", "", "save the plan to `FILE`")
	}
	if verb == "apply" {
		fs.StringVar(&f.planIn, "plan", "", "deploy exactly the plan saved in `FILE`")
	}
	return fs
}

func parseMethodFlags(verb string, args []string) (methodFlags, error) {
	var f methodFlags
	fs := methodFlagSet(verb, &f)
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
	verb, f, code, done := methodArgs(m, args, e.stdout, e.stderr)
	if done {
		return code
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	mr := &methodRun{m: m, verb: verb, f: f, e: e}
	code, err := mr.run(ctx)
	if err != nil {
		msg := fmt.Sprintf("switchyard %s %s: %v", name, verb, oneLine(err))
		fmt.Fprintln(e.stderr, msg)
		if f.output == "json" && verb != "names" && verb != "schema" {
			// JSON readers still get a log event and the closing summary.
			out := newJSONOutput(e.stdout)
			out.Log("", "error", msg)
			out.Summary(0, 0, 0, code)
		}
	}
	return code
}

func verbs(m method.Method) []string {
	if m.Name == "ssh" {
		return []string{"apply", "plan", "verdict", "names", "schema"}
	}
	return []string{"apply", "plan", "destroy", "refresh", "run", "verdict", "names", "schema"}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// refusal marks errors that refuse the run before anything changed (exit 2).
func exitFor(err error) int {
	var evalErr *definition.EvalError
	switch {
	case field.IsRefusal(err), errors.Is(err, errRefused):
		return ExitRefused
	case errors.As(err, &evalErr):
		return ExitInfra
	}
	return ExitInfra
}

var errRefused = errors.New("refused")

// methodRun is one `switchyard <method> <verb>`.
type methodRun struct {
	m    method.Method
	verb string
	f    methodFlags
	e    env
}

// submission reads the DEPLOYMENT bytes: --deployment FILE or - (stdin), else the
// DEPLOYMENT variable; none at all means the baked configuration.
func (mr *methodRun) submission() ([]byte, error) {
	switch mr.f.deployment {
	case "":
		return []byte(mr.e.getenv("DEPLOYMENT")), nil
	case "-":
		b, err := io.ReadAll(mr.e.stdin)
		if err != nil {
			return nil, fmt.Errorf("--deployment: reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(mr.f.deployment)
	if err != nil {
		return nil, fmt.Errorf("--deployment: %w: %w", errors.Unwrap(err), errRefused)
	}
	return b, nil
}

func (mr *methodRun) run(ctx context.Context) (int, error) {
	def, err := definition.Load(ctx, mr.f.tree)
	if err != nil {
		return exitFor(err), err
	}
	if mr.verb == "schema" {
		return ExitOK, writeJSON(mr.e.stdout, plan.Schema(def, mr.m))
	}
	sub, err := mr.submission()
	if err != nil {
		return exitFor(err), err
	}
	d, err := merge.Merge(def, mr.m, sub)
	if err != nil {
		return exitFor(err), err
	}
	if mr.verb == "names" {
		names, err := plan.Names(d, mr.f.group)
		if err != nil {
			return exitFor(err), err
		}
		return ExitOK, writeJSON(mr.e.stdout, names)
	}
	cfg, err := effects.ConfigFromEnv(mr.e.getenv)
	if err != nil {
		return ExitRefused, err
	}
	p, err := plan.Compute(d, coordinates.Environment(mr.m.Coordinates), plan.Options{
		StateDir: mr.f.stateDir, Group: mr.f.group, Nodes: mr.f.nodes,
		Exclude: []string{mr.f.planOut, mr.f.planIn}})
	if err != nil {
		return exitFor(err), err
	}
	if err := p.Write(); err != nil {
		return ExitInfra, fmt.Errorf("writing the node plans: %w", err)
	}
	var out Output = newTextOutput(mr.e.stdout, mr.e.stderr)
	if mr.f.output == "json" {
		out = newJSONOutput(mr.e.stdout)
	}
	f := &fleet{m: mr.m, d: d, p: p, cfg: cfg, out: out, parallel: mr.f.parallel, stateDir: mr.f.stateDir}
	if mr.m.Name != "ssh" && mr.verb != "verdict" {
		return (&tfRun{fleet: f, mr: mr}).run(ctx)
	}
	switch mr.verb {
	case "plan":
		return f.plan(ctx, mr.f.planOut)
	case "apply":
		if mr.f.planIn != "" {
			if err := checkSavedPlan(mr.f.planIn, d, p); err != nil {
				return exitFor(err), err
			}
		}
		return f.deploy(ctx, false), nil
	case "verdict":
		return f.deploy(ctx, true), nil
	}
	return ExitRefused, fmt.Errorf("verb %q not built", mr.verb)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
