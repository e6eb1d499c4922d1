package methods

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/switchyard-nix/switchyard/exitcode"
	"io"
	"os"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/coordinates"
	"github.com/switchyard-nix/switchyard/plan/credential"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/receipt"
	"github.com/switchyard-nix/switchyard/verdict"
)

// Exit codes of SPEC 2.1, as package exitcode has them.
const (
	ExitOK      = exitcode.OK
	ExitVerdict = exitcode.Verdict
	ExitRefused = exitcode.Refused
	ExitInfra   = exitcode.Infra
)

// ErrRefused marks an error that refuses the run before anything changed (exit 2).
var ErrRefused = errors.New("refused")

// Subset tells whether the request picks some nodes rather than every enabled one.
func (req Request) Subset() bool { return req.Group != "" || len(req.Nodes) > 0 || len(req.On) > 0 }

// Request is one `switchyard <method> <verb>`.
type Request struct {
	Method, Verb string
	Tree         string // the operator tree, absolute
	Group        string
	Nodes        []string // --node: names
	On           []string // --on: names, globs, @tags, ! exclusions (plan.Selection)
	Deployment   []byte   // the DEPLOYMENT submission (none: the baked configuration)
	Signature    []byte   // its armored SSH signature (SPEC 6.8); none: unsigned
	StateDir     string   // "" is <tree>/.switchyard
	Parallel     int      // nodes at once; 0 is the method's parallel setting
	Rollout      string   // apply's stages, "canary=N,batch=M" (ssh method); "" is the rollout setting
	PlanIn       string   // apply --plan FILE
	PlanOut      string   // plan --out FILE
	// ReceiptKey is --receipt-key (apply, receipts): the deployer's key signing the
	// receipts; "" is SWITCHYARD_RECEIPT_KEY. ReceiptPubKey is --receipt-pubkey
	// (receipts verify). ReceiptsAction is the receipts verb's show or verify.
	ReceiptKey, ReceiptPubKey, ReceiptsAction string
	TofuArgs                                  []string
	Argv                                      []string // exec: the command run on each node
	Offline                                   bool     // plan without contacting any node
	// AllowOlder is apply --allow-older: a signed submission that another superseded
	// on a group is applied anyway (SPEC 6.9).
	AllowOlder bool
	// Mode is apply --mode: switch, boot or test; "" is switch.
	Mode string
	// NoSubstitute is --no-substitute (plan and apply of every method): every
	// node is sent all it lacks, none fetches from its own binary caches.
	NoSubstitute bool
	// Reboot is apply --reboot: reboot each node once its boot entry points at the
	// new generation, and judge the system it booted.
	Reboot bool
	// RebootTimeout is apply --reboot-timeout: how long a node may take to come back
	// (more than 0 with Reboot; the flag's default is effects.DefaultRebootTimeout).
	RebootTimeout time.Duration
	// Cached is status --cached: the last receipt's verdict, not a fresh one.
	Cached bool
	Getenv func(string) string
	Stdin  io.Reader
	// Stdout and Stderr take what is no event: names and schema JSON, and OpenTofu's
	// own output (run's passthrough; every verb's in text mode).
	Stdout, Stderr io.Writer
	JSON           bool // the events go out as JSON Lines: OpenTofu's human output is dropped
}

// Submission reads the DEPLOYMENT bytes as --deployment names them: a file, or - for
// stdin; "" is the DEPLOYMENT variable, and none at all the baked configuration.
func Submission(file string, getenv func(string) string, stdin io.Reader) ([]byte, error) {
	switch file {
	case "":
		return []byte(getenv("DEPLOYMENT")), nil
	case "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("--deployment: reading stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--deployment: %w: %w", errors.Unwrap(err), ErrRefused)
	}
	return b, nil
}

// Reporter takes a run's events: effects' phases, logs and verdicts, the plan verb's
// findings, and the closing summary.
type Reporter interface {
	Phase(node, phase string, state effects.PhaseState, elapsed time.Duration)
	Log(node, level, msg string)
	Verdict(v verdict.Verdict)
	// Plan is one node's plan; would, what a switch would do to its units (nil: not
	// asked: offline, unchanged, an Incus instance the plan creates, or unreachable).
	Plan(node, nixosConf string, changed bool, would *effects.DryActivation)
	Summary(nodes, ok, failed, exitCode int)
	// PlanSummary closes the plan verb: of nodes, changed would be deployed and
	// failed could not be planned (they count as changed too).
	PlanSummary(nodes, changed, failed, exitCode int)
	// Exec is one node's answer to the exec verb: its command's exit status and
	// output (bounded).
	Exec(node string, exitCode int, stdout, stderr string)
	// Status is one node's three truths, for the status verb.
	Status(s verdict.NodeStatus)
}

// Run runs req's verb and returns the exit code (SPEC 2.1). err, when not nil, is
// the one-line cause of a run that stopped; a node's failure is reported to rep.
func Run(ctx context.Context, req Request, rep Reporter) (exit int, err error) {
	req = req.withDefaults()
	m, ok := method.Lookup(req.Method)
	if !ok {
		return ExitRefused, fmt.Errorf("unknown method %q: %w", req.Method, ErrRefused)
	}
	if !m.HasVerb(req.Verb) {
		return ExitRefused, fmt.Errorf("unknown verb %q (want one of %s): %w", req.Verb, strings.Join(m.Verbs, ", "), ErrRefused)
	}
	def, err := definition.Load(ctx, req.Tree)
	if err != nil {
		return exitFor(err), err
	}
	if req.Verb == "schema" {
		return ExitOK, writeJSON(req.Stdout, plan.Schema(def, m))
	}
	// Before the submission is read for anything: a refused signature changes nothing.
	signer, err := checkSignature(def, req.Deployment, req.Signature, time.Now())
	if err != nil {
		return exitFor(err), err
	}
	if signer.Principal != "" {
		rep.Log("", "info", fmt.Sprintf("deployment signed by %s (submission sha256 %s)", signer.Principal, signer.SubmissionSHA256))
	}
	// The receipt key is read before anything else runs: a bad one changes nothing.
	var rkey *receipt.Key
	var rkeyFile string
	if req.Verb == "apply" || req.Verb == "run" {
		if rkey, rkeyFile, err = receiptKey(req.ReceiptKey, req.Getenv); err != nil {
			return exitFor(err), err
		}
	}
	var pub ed25519.PublicKey
	if req.Verb == "receipts" {
		if req.ReceiptsAction != "show" && req.ReceiptsAction != "verify" {
			return ExitRefused, fmt.Errorf("receipts: give show or verify: %w", ErrRefused)
		}
		if pub, err = receiptPub(req); err != nil {
			return exitFor(err), err
		}
	}
	d, err := mergeSubmission(def, m, req)
	if err != nil {
		return exitFor(err), err
	}
	if req.Verb == "names" {
		names, err := plan.Names(d, req.Group)
		if err != nil {
			return exitFor(err), err
		}
		return ExitOK, writeJSON(req.Stdout, names)
	}
	cfg, err := effects.ConfigFromEnv(req.Getenv)
	if err != nil {
		return ExitRefused, err
	}
	if cfg.Mode, err = effects.ParseMode(req.Mode); err != nil {
		return ExitRefused, &field.Error{Source: "--mode", Reason: err.Error()}
	}
	if err := checkReboot(req, &cfg); err != nil {
		return ExitRefused, err
	}
	p, err := plan.Compute(d, coordinates.Environment(m.Coordinates), plan.Options{
		StateDir: req.StateDir, Group: req.Group, Nodes: req.Nodes, On: req.On,
		Exclude: []string{req.PlanOut, req.PlanIn}})
	if err != nil {
		return exitFor(err), err
	}
	groups := planGroups(p)
	if err := checkScope(def.Submissions.Scopes, signer, groups); err != nil {
		return exitFor(err), err
	}
	if err := checkDomain(def, d, groups); err != nil {
		return exitFor(err), err
	}
	if err := p.Write(); err != nil {
		return ExitInfra, fmt.Errorf("writing the node plans: %w", err)
	}
	f := newFleet(m, d, p, cfg, rep, req)
	f.signer = signer
	if req.Verb == "apply" || req.Verb == "run" {
		f.rec, f.prov, f.rkey = receipt.NewRecorder(rep), runProvenance(p, signer), rkey
	}
	if m.Runner == method.RunnerTofu && req.Verb != "verdict" && req.Verb != "exec" && req.Verb != "status" {
		return (&tfRun{fleet: f, req: req, receiptKeyFile: rkeyFile, pub: pub}).run(ctx)
	}
	switch req.Verb {
	case "plan":
		return f.plan(ctx, req.PlanOut)
	case "apply":
		if err := f.setRollout(req.Rollout); err != nil {
			return exitFor(err), err
		}
		if req.PlanIn != "" {
			if err := checkSavedPlan(req.PlanIn, d, p); err != nil {
				return exitFor(err), err
			}
		}
		if err := recordApplied(p.StateDir, groups, signer, req.AllowOlder); err != nil {
			return exitFor(err), err
		}
		return f.deploy(ctx, false), nil
	case "verdict":
		return f.deploy(ctx, true), nil
	case "exec":
		return f.exec(ctx, req.Argv), nil
	case "status":
		return f.status(ctx, req.Cached), nil
	case "receipts":
		list := func(node string) ([]kept, error) { return keptReceipts(p.StateDir, node) }
		return f.receipts(ctx, req.ReceiptsAction, pub, list, req.Stdout)
	}
	return ExitRefused, fmt.Errorf("verb %q not built", req.Verb)
}

// checkReboot reads apply's --reboot and --reboot-timeout into cfg, for every method
// (the OpenTofu ones hand them to the provider, whose deploy body reboots), refusing
// what cannot run before anything does.
func checkReboot(req Request, cfg *effects.Config) error {
	if !req.Reboot {
		return nil
	}
	if req.RebootTimeout <= 0 {
		return &field.Error{Source: "--reboot-timeout", Reason: fmt.Sprintf("%s is not a duration greater than 0", req.RebootTimeout)}
	}
	next := *cfg
	next.Reboot, next.RebootTimeout = true, req.RebootTimeout
	if err := next.CheckReboot(); err != nil {
		return &field.Error{Source: "--reboot", Reason: err.Error()}
	}
	*cfg = next
	return nil
}

// mergeSubmission merges the submission, confined as SPEC 6.9 says: credentials only
// under the tree's and the deployer's credential directories, tree paths only where
// nixos_conf looks (not the state dir, not a saved plan).
func mergeSubmission(def *definition.Definition, m method.Method, req Request) (*merge.Deployment, error) {
	dirs, err := credential.Dirs(def.Submissions.CredentialDirs, req.Getenv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrRefused)
	}
	return merge.Merge(def, m, req.Deployment, merge.Options{CredentialDirs: dirs, Exclude: []string{req.StateDir, req.PlanOut, req.PlanIn}})
}

func (r Request) withDefaults() Request {
	if r.StateDir == "" {
		r.StateDir = plan.DefaultStateDir(r.Tree)
	}
	if r.Getenv == nil {
		r.Getenv = os.Getenv
	}
	if r.Stdin == nil {
		r.Stdin = strings.NewReader("")
	}
	if r.Stdout == nil {
		r.Stdout = io.Discard
	}
	if r.Stderr == nil {
		r.Stderr = io.Discard
	}
	return r
}

// exitFor is the exit code of an error that stopped a run: 2 for a refusal, else 3.
func exitFor(err error) int {
	if field.IsRefusal(err) || errors.Is(err, ErrRefused) {
		return ExitRefused
	}
	return ExitInfra
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
