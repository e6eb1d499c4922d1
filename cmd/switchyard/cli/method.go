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
	"time"

	"github.com/switchyard-nix/switchyard/console"
	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/methods"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/redact"
)

// methodFlags are the common flags of `switchyard <method> <verb>` (SPEC 2).
type methodFlags struct {
	tree, group, deployment, signature, output, stateDir, planIn, planOut, rollout, mode string
	receiptKey, receiptPubKey, receiptsAction                                            string
	nodes, on                                                                            multiFlag
	parallel                                                                             int
	tofuArgs                                                                             []string // run -- <args>
	argv                                                                                 []string // exec -- <argv>
	offline, allowOlder, cached, noSubstitute, reboot                                    bool
	rebootTimeout                                                                        time.Duration
}

// methodFlagSet declares a verb's flags into f; the usage text prints the same set.
func methodFlagSet(m method.Method, verb string, f *methodFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.tree, "tree", ".", "the operator tree `DIR`")
	fs.StringVar(&f.group, "group", "", "only the group `NAME`")
	fs.Var(&f.on, "on", "only the nodes `SEL` selects: names, globs (web*) and tags (@edge), comma-separated or repeated; !SEL excludes")
	fs.Var(&f.nodes, "node", "only the node `NAME` (repeatable; as --on NAME)")
	fs.StringVar(&f.deployment, "deployment", "", "DEPLOYMENT submission `FILE`, or - for stdin (default: the DEPLOYMENT variable)")
	fs.StringVar(&f.signature, "deployment-signature", "", "the submission's SSH signature `FILE` (ssh-keygen -Y sign -n switchyard-deployment; default: the DEPLOYMENT_SIGNATURE variable)")
	fs.StringVar(&f.output, "output", "text", "`FORMAT`: text or json")
	fs.IntVar(&f.parallel, "parallel", 0, "how many nodes at once, `N` (default: the method's parallel setting, 8)")
	fs.StringVar(&f.stateDir, "state-dir", "", "the state `DIR` (default: <tree>/.switchyard)")
	if verb == "plan" {
		fs.StringVar(&f.planOut, "out", "", "save the plan to `FILE`")
		fs.BoolVar(&f.offline, "offline", false, "plan without contacting any node")
	}
	if verb == "apply" {
		fs.StringVar(&f.planIn, "plan", "", "deploy exactly the plan saved in `FILE`")
		fs.BoolVar(&f.allowOlder, "allow-older", false, "apply a signed submission that a later one superseded on its groups (a roll back)")
		applyModeFlags(fs, f)
	}
	if verb == "apply" || verb == "plan" {
		fs.BoolVar(&f.noSubstitute, "no-substitute", false, "stream every path a node lacks: no node first fetches from the binary caches of its own Nix configuration (as its substituteOnNode = false)")
	}
	if verb == "status" {
		fs.BoolVar(&f.cached, "cached", false, "ready: the verdict of each node's last receipt and its age, not a fresh verdict-only pass")
	}
	if verb == "apply" || verb == "run" || verb == "receipts" {
		fs.StringVar(&f.receiptKey, "receipt-key", "", "the deployer's OpenSSH ed25519 private key `FILE` signing the receipts (default: the SWITCHYARD_RECEIPT_KEY variable; none: unsigned)")
	}
	if verb == "receipts" {
		fs.StringVar(&f.receiptPubKey, "receipt-pubkey", "", "verify with this OpenSSH ed25519 public key `FILE` instead of --receipt-key's")
	}
	if verb == "apply" && m.Staged() {
		fs.StringVar(&f.rollout, "rollout", "", "deploy in stages, `SPEC` canary=N,batch=M (M a count or a percentage): a failed stage holds the rest (default: the rollout setting)")
	}
	return fs
}

// applyModeFlags are apply's --mode, --reboot and --reboot-timeout, the same for
// every method: the OpenTofu ones hand them to the provider's deploy body.
func applyModeFlags(fs *flag.FlagSet, f *methodFlags) {
	fs.StringVar(&f.mode, "mode", "switch", "`MODE`, as nixos-rebuild's: switch (activate, confirm, then set the profile and boot entry), "+
		"boot (set the profile and boot entry only: not judged), test (activate and confirm only)")
	fs.BoolVar(&f.reboot, "reboot", false, "once the boot entry of a node this apply deploys points at the new generation, reboot it, wait for a new boot id, "+
		"check that it booted the deployed generation, then judge the booted system (a verdict-only pass); a failed node is not rebooted")
	fs.DurationVar(&f.rebootTimeout, "reboot-timeout", effects.DefaultRebootTimeout, "with --reboot, how long a node may take to come back, `DURATION` (e.g. 90s, 15m)")
}

func parseMethodFlags(m method.Method, verb string, args []string) (methodFlags, error) {
	var f methodFlags
	fs := methodFlagSet(m, verb, &f)
	if verb == "receipts" && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		f.receiptsAction, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if verb == "run" {
		f.tofuArgs = fs.Args()
		if len(f.tofuArgs) == 0 {
			return f, fmt.Errorf("give OpenTofu's arguments after --, e.g. run -- state list")
		}
	} else if verb == "exec" {
		f.argv = fs.Args()
		if len(f.argv) == 0 || f.argv[0] == "" {
			return f, fmt.Errorf("give the command after --, e.g. exec --on web1 -- systemctl is-system-running")
		}
	} else if verb == "receipts" && f.receiptsAction == "" && fs.NArg() == 1 {
		f.receiptsAction = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if verb == "receipts" && f.receiptsAction != "show" && f.receiptsAction != "verify" {
		return f, fmt.Errorf("give show or verify, e.g. receipts verify --node web1")
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
func runMethod(m method.Method, args []string, e env) int {
	verb, f, code, done := methodArgs(m, args, e.stdout, e.stderr)
	if done {
		return code
	}
	if verb != "run" {
		// What reaches the operator passes redact.Default: the credentials read
		// during the run are added to it (SPEC 6.9: no output quotes one). run is
		// OpenTofu's own terminal, prompts without a newline included: tofu
		// redacts what it relays there.
		stdout, stderr := redact.Default.NewWriter(e.stdout), redact.Default.NewWriter(e.stderr)
		if f.output == "json" {
			stdout = redact.Default.NewJSONWriter(e.stdout)
		}
		defer stderr.Flush()
		defer stdout.Flush()
		e.stdout, e.stderr = stdout, stderr
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	req := methods.Request{Method: m.Name, Verb: verb, Tree: f.tree, Group: f.group, Nodes: f.nodes, On: f.on,
		StateDir: f.stateDir, Parallel: f.parallel, Rollout: f.rollout, PlanIn: f.planIn, PlanOut: f.planOut, TofuArgs: f.tofuArgs, Argv: f.argv,
		ReceiptKey: f.receiptKey, ReceiptPubKey: f.receiptPubKey, ReceiptsAction: f.receiptsAction,
		Offline: f.offline, AllowOlder: f.allowOlder, Mode: f.mode, NoSubstitute: f.noSubstitute, Reboot: f.reboot, RebootTimeout: f.rebootTimeout, Cached: f.cached, Getenv: e.getenv, Stdin: e.stdin, Stdout: e.stdout, Stderr: e.stderr, JSON: f.output == "json"}
	var out methods.Reporter = console.NewText(e.stdout, e.stderr)
	if req.JSON {
		out = newJSONOutput(e.stdout)
	}
	var err error
	if verb != "schema" {
		req.Deployment, err = methods.Submission(f.deployment, e.getenv, e.stdin)
	}
	if err == nil && verb != "schema" {
		req.Signature, err = methods.SubmissionSignature(f.signature, e.getenv)
	}
	if err == nil {
		code, err = methods.Run(ctx, req, out)
	} else if code = exitcode.Infra; errors.Is(err, methods.ErrRefused) {
		code = exitcode.Refused
	}
	if err != nil {
		msg := fmt.Sprintf("switchyard %s %s: %s", m.Name, verb, strings.ReplaceAll(err.Error(), "\n", " "))
		fmt.Fprintln(e.stderr, msg)
		if req.JSON && verb != "names" && verb != "schema" {
			// JSON readers still get a log event and the closing summary.
			out.Log("", "error", msg)
			out.Summary(0, 0, 0, code)
		}
	}
	return code
}
