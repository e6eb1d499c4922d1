package methods

import (
	"bytes"
	"context"
	"fmt"
	"github.com/switchyard-nix/switchyard/localcmd"
	"github.com/switchyard-nix/switchyard/pool"
	"github.com/switchyard-nix/switchyard/transports"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/evalcache"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/receipt"
	"github.com/switchyard-nix/switchyard/rollout"
	"github.com/switchyard-nix/switchyard/transports/incus"
	"github.com/switchyard-nix/switchyard/transports/ssh"
	"github.com/switchyard-nix/switchyard/verdict"
)

// fleet is the ssh runner: it runs a method's verbs on the planned nodes over their
// transports. The OpenTofu runner uses its evaluation and its verdict-only pass.
type fleet struct {
	m        method.Method
	d        *merge.Deployment
	s        merge.Settings
	p        *plan.Plan
	cfg      effects.Config
	out      Reporter
	parallel int
	offline  bool
	// noSubstitute is --no-substitute: no node fetches from its own caches, whatever
	// its substituteOnNode.
	noSubstitute bool
	rollout      rollout.Spec // apply's stages (setRollout); the zero Spec: every node at once
	signer       signed       // the submission's hash and signer: the plan's provenance (SPEC 6.8)

	// apply's receipts (SPEC 6.8): rec keeps each body's phases; nil: none are made.
	rec  *receipt.Recorder
	prov receipt.Provenance
	rkey *receipt.Key // nil: unsigned

	// What reaches outside the process, replaced by the unit tests: a node's
	// transport, its evaluation, and a derivation's outputs.
	open     func(n *plan.Node) (effects.Transport, error)
	evaluate func(ctx context.Context, n *plan.Node) (drv, how string, err error)
	outputs  func(ctx context.Context, drv string) (string, error)
	// build builds a derivation here (the plan verb's, for dry-activate).
	build func(ctx context.Context, drv string) (string, error)
	// body runs the deploy body on one node (nil: effects' own; the runner's unit
	// tests play its outcome to test the rollout's decisions).
	body func(ctx context.Context, d *effects.Deploy) effects.Result
}

func newFleet(m method.Method, d *merge.Deployment, p *plan.Plan, cfg effects.Config, out Reporter, req Request) *fleet {
	f := &fleet{m: m, d: d, s: d.Typed(), p: p, cfg: cfg, out: out, parallel: req.Parallel, offline: req.Offline,
		noSubstitute: req.NoSubstitute}
	f.open = f.transport
	var cache *evalcache.Cache
	if err := evalcache.Usable(cfg.EvalCacheDir); err != nil {
		out.Log("", "warn", fmt.Sprintf("eval cache not used: %v", err))
	} else {
		cache = evalcache.Open(cfg.EvalCacheDir, nil)
	}
	var nodes []*plan.Node
	if p != nil {
		nodes = p.Nodes
	}
	// The plan's nodes the cache misses are evaluated together (evalBatch).
	f.evaluate = newEvalBatch(cache, nodes).evaluate
	f.build = func(ctx context.Context, drv string) (string, error) {
		return effects.Build(ctx, effects.Source{Drv: drv})
	}
	f.outputs = func(ctx context.Context, drv string) (string, error) {
		return local(ctx, nil, []string{"nix-store", "--query", "--outputs", "--", drv})
	}
	return f
}

func (f *fleet) width() int {
	if f.parallel > 0 {
		return f.parallel
	}
	if n := f.s.Parallel; n > 0 {
		return int(n)
	}
	return 8
}

// journal is where the ssh method keeps each node's journal (effects.Journal): the
// state dir's journal/<node>.json, beside its receipts.
func (f *fleet) journal() effects.Journal {
	if f.p == nil || f.p.StateDir == "" {
		return nil
	}
	return effects.FileJournal{Dir: filepath.Join(f.p.StateDir, "journal")}
}

// projectOf is the Incus project of a node's instance: the project setting, or for
// a tenant (tf-incus-operator) its group's project.
func (f *fleet) projectOf(n *plan.Node) string {
	if f.m.TenantsOnly {
		return tenantProject(f.s, n.Group)
	}
	return f.s.Project
}

// transport reaches a planned node: an Incus node (tf-incus) through the Incus API
// of the incusRemote setting's daemon (default the local one), in the method's project (a
// tenant's: its group's project); otherwise over SSH with its pinned host key, or the
// knownHostsFile setting (default ~/.ssh/known_hosts); the sshKeyFile credential and
// the agent.
func (f *fleet) transport(n *plan.Node) (effects.Transport, error) {
	if f.m.Transport == method.Incus {
		if n.Plan.Incus == nil {
			return nil, fmt.Errorf("%s: no incus settings", n.Name)
		}
		return transports.Open(transports.Spec{Kind: transports.Incus, Incus: incus.Config{Instance: n.Name,
			Project: f.projectOf(n), Remote: f.s.IncusRemote, KeyFile: f.s.IncusClientKeyFile, NoSubstitute: f.noSubstituteOn(n)}})
	}
	s := n.Plan.SSH
	if s == nil {
		return nil, fmt.Errorf("%s: no ssh settings", n.Name)
	}
	cfg := ssh.Config{User: s.User, Host: s.Host, Port: int(s.Port), HostKey: s.HostKey,
		KnownHostsFile: f.s.KnownHostsFile, NoSubstitute: f.noSubstituteOn(n)}
	if key := f.s.SSHKeyFile; key != "" {
		cfg.KeyFiles = []string{key}
	}
	return transports.Open(transports.Spec{Kind: transports.SSH, SSH: cfg})
}

// noSubstituteOn tells whether n's copies stream every missing path: the run's
// --no-substitute or the node's substituteOnNode = false.
func (f *fleet) noSubstituteOn(n *plan.Node) bool { return f.noSubstitute || n.Plan.NoSubstitute }

// evaluate gives a node's toplevel derivation through the eval cache.
func evaluate(ctx context.Context, cache *evalcache.Cache, n *plan.Node) (string, string, error) {
	drv, hit, err := cache.Resolve(ctx, n.NixosConf, func(ctx context.Context) (string, error) {
		// Without the caller's environment: nixos_conf, the cache key, does not cover it.
		out, err := local(ctx, plan.EvalEnv(os.LookupEnv), n.EvalArgv())
		return strings.TrimSpace(out), err
	})
	if hit {
		return drv, "eval cache hit", err
	}
	return drv, "evaluated", err
}

// local runs a command on this machine with the environment env (nil: this
// process's); an error carries stderr's last line.
func local(ctx context.Context, env, argv []string) (string, error) {
	out, err := localcmd.Output(ctx, env, argv...)
	return string(out), err
}

// deploy is apply (the deploy pass, skipping nodes already running their toplevel)
// or verdict (the verdict-only pass) on every planned node. apply with a rollout goes
// stage by stage (package rollout) and stops at the first stage with a failed
// verdict: the nodes after it are held, never contacted beyond the probe.
func (f *fleet) deploy(ctx context.Context, verdictOnly bool) int {
	cfg := f.cfg
	cfg.VerdictOnly = cfg.VerdictOnly || verdictOnly
	spec := f.rollout
	if cfg.VerdictOnly {
		spec = rollout.Spec{} // the verdict pass changes nothing: nothing to stage
	}
	byName := map[string]*plan.Node{}
	var names []string
	for _, n := range f.p.Nodes {
		byName[n.Name] = n
		names = append(names, n.Name)
	}
	var probes map[string]probed
	changed := map[string]bool{}
	if spec.Enabled() {
		probes = f.probe(ctx)
		for name, p := range probes {
			changed[name] = p.sp.Changed
		}
	}
	stages := rollout.Stages(names, changed, spec)
	codes := map[string]int{}
	ok := 0
	for i, st := range stages {
		if spec.Enabled() {
			f.out.Log("", "info", fmt.Sprintf("rollout: %s of %d: %s", stageName(st), len(stages), strings.Join(st.Nodes, ", ")))
		}
		var nodes []*plan.Node
		for _, name := range st.Nodes {
			nodes = append(nodes, byName[name])
		}
		ok += f.deployStage(ctx, cfg, nodes, codes)
		failed := rollout.Failed(st, codes)
		if len(failed) == 0 {
			continue
		}
		var held []string
		for _, later := range stages[i+1:] {
			held = append(held, later.Nodes...)
		}
		if len(held) > 0 {
			f.out.Log("", "error", fmt.Sprintf("rollout: stopped at %s (%s failed): %d nodes held", st,
				strings.Join(failed, ", "), len(held)))
		}
		for _, name := range held {
			v := probes[name].held(name, rollout.HeldReason(st, failed))
			f.out.Verdict(v)
			codes[name] = v.ExitCode
		}
		break
	}
	code := ExitOK
	for _, c := range codes {
		code = max(code, c)
	}
	f.out.Summary(len(f.p.Nodes), ok, len(f.p.Nodes)-ok, code)
	return code
}

// stageName is a stage as the rollout's log names it: "canary", "batch 2".
func stageName(s rollout.Stage) string { return strings.TrimPrefix(s.String(), "the ") }

// deployStage runs the deploy body on nodes (at most width at once), records each
// node's exit code in codes and returns how many passed. Only these nodes'
// transports are opened.
func (f *fleet) deployStage(ctx context.Context, cfg effects.Config, nodes []*plan.Node, codes map[string]int) (ok int) {
	var deploys []*effects.Deploy
	var planned []*plan.Node
	var rep effects.Reporter = f.out
	if f.rec != nil {
		rep = f.rec
	}
	drvs := make([]string, len(nodes)) // each body's derivation, for its receipt
	for _, n := range nodes {
		t, err := f.open(n)
		if err != nil {
			f.out.Log(n.Name, "error", fmt.Sprintf("%s: wait: %v", n.Name, err))
			codes[n.Name] = ExitRefused
			continue
		}
		defer t.Close()
		i := len(deploys)
		deploys = append(deploys, &effects.Deploy{Node: n.Name, Transport: t, Config: cfg, Reporter: rep,
			Source: effects.Source{Evaluate: func(ctx context.Context) (string, string, error) {
				drv, how, err := f.evaluate(ctx, n)
				drvs[i] = drv
				return drv, how, err
			}},
			SkipUnchanged: true, Journal: f.journal()})
		planned = append(planned, n)
	}
	index := make(map[*effects.Deploy]int, len(deploys))
	for i, d := range deploys {
		index[d] = i
	}
	body := f.body
	if body == nil {
		body = func(ctx context.Context, d *effects.Deploy) effects.Result { return d.Run(ctx) }
	}
	// Each node's receipt is made and delivered as soon as its body ends, by its own
	// worker: kept one after another once the whole fleet was done, they were a
	// queue at the end of every apply (issue 35: a local nix-store query and a
	// command on the node each, up to deliverTimeout for a slow node, times the fleet).
	results := effects.RunFleet(ctx, deploys, f.width(), func(ctx context.Context, d *effects.Deploy) effects.Result {
		r := body(ctx, d)
		if i := index[d]; f.rec != nil && !cfg.VerdictOnly {
			f.keepReceipt(ctx, planned[i], d.Transport, drvs[i], r)
		}
		return r
	})
	for i, r := range results {
		codes[planned[i].Name] = r.ExitCode
		if r.ExitCode == ExitOK {
			ok++
		}
	}
	return ok
}

// setRollout reads apply's rollout: the --rollout flag (spec), else the rollout
// setting. A bad one refuses the run before any node is contacted.
func (f *fleet) setRollout(spec string) error {
	what := "--rollout"
	if spec == "" {
		what = "the rollout setting"
		spec = f.s.Rollout
	}
	r, err := rollout.Parse(spec)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", what, err, ErrRefused)
	}
	f.rollout = r
	return nil
}

// probed is what a rollout's probe learnt of a node: planNode's answer.
type probed struct {
	sp   savedPlanNode
	seen seen
	code int
}

// probe asks every node, in parallel as the plan verb does, whether it already runs
// its toplevel: those don't count toward a stage. Its logs are dropped, since the
// deploy that follows reports the same failures.
func (f *fleet) probe(ctx context.Context) map[string]probed {
	q := *f
	q.out = quiet{f.out}
	results := pool.Map(ctx, f.p.Nodes, f.width(), func(ctx context.Context, n *plan.Node) probed {
		sp, s, c := q.planNode(ctx, n)
		return probed{sp, s, c}
	})
	out := map[string]probed{}
	for i, n := range f.p.Nodes {
		out[n.Name] = results[i]
	}
	return out
}

// held is the verdict of a node the rollout did not reach: not ok, exit 1, nothing
// on it changed or read beyond the probe.
func (p probed) held(node, reason string) verdict.Verdict {
	return verdict.Verdict{Node: node, Target: p.seen.target, Pass: verdict.PassDeploy, Reachable: p.code == ExitOK,
		Toplevel: p.sp.Toplevel, Previous: p.seen.current, Switch: verdict.Switch{Result: verdict.SwitchHeld},
		ExitCode: ExitVerdict, Reasons: []string{reason}}
}

// quiet is a Reporter without logs.
type quiet struct{ Reporter }

func (quiet) Log(node, level, msg string) {}

// plan evaluates every node (through the eval cache, so the apply that follows does
// not evaluate again), and asks each node which toplevel it runs; offline, no node
// is asked, and each is reported as changed.
func (f *fleet) plan(ctx context.Context, out string) (int, error) {
	saved := newSavedPlan(f.d, f.signer)
	type planned struct {
		sp    savedPlanNode
		code  int
		would *effects.DryActivation
	}
	results := pool.Map(ctx, f.p.Nodes, f.width(), func(ctx context.Context, n *plan.Node) planned {
		sp, _, c := f.planNode(ctx, n)
		p := planned{sp: sp, code: c}
		if c == ExitOK && sp.Changed && !f.offline {
			p.would, p.code = f.dryActivate(ctx, n, sp.Drv)
		}
		return p
	})
	code, failed := ExitOK, 0
	for i, n := range f.p.Nodes {
		saved.Nodes[n.Name] = results[i].sp
		code = max(code, results[i].code)
		if results[i].code != ExitOK {
			failed++
		}
	}
	for i, n := range f.p.Nodes {
		f.out.Plan(n.Name, n.NixosConf, saved.Nodes[n.Name].Changed, results[i].would)
	}
	if err := saved.write(out); err != nil {
		return ExitInfra, err
	}
	changed := 0
	for _, sp := range saved.Nodes {
		if sp.Changed {
			changed++
		}
	}
	f.out.PlanSummary(len(f.p.Nodes), changed, failed, code)
	return code, nil
}

// dryActivate builds the node's toplevel, copies its closure to the node and asks the
// node what a switch to it would do (switch-to-configuration dry-activate): the plan
// verb's per-node list of units it would stop, restart, reload and start. Nothing is
// activated; the copied paths stay in the node's store, as apply would copy them.
func (f *fleet) dryActivate(ctx context.Context, n *plan.Node, drv string) (*effects.DryActivation, int) {
	fail := func(err error) (*effects.DryActivation, int) {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: plan: dry-activate: %v", n.Name, err))
		return nil, ExitInfra
	}
	top, err := f.build(ctx, drv)
	if err != nil {
		return fail(err)
	}
	t, err := f.open(n)
	if err != nil {
		return fail(err)
	}
	defer t.Close()
	if err := t.CopyClosure(ctx, []string{top}); err != nil {
		return fail(fmt.Errorf("copying the closure: %w", err))
	}
	d, err := effects.DryActivate(ctx, t, top)
	if err != nil {
		return fail(err)
	}
	return &d, ExitOK
}

// seen is what planNode learnt of a node beyond its saved plan: how it is reached
// and what it runs.
type seen struct{ target, current string }

func (f *fleet) planNode(ctx context.Context, n *plan.Node) (savedPlanNode, seen, int) {
	sp := savedPlanNode{NixosConf: n.NixosConf, Changed: true}
	var s seen
	drv, how, err := f.evaluate(ctx, n)
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: build: evaluation failed: %v", n.Name, err))
		return sp, s, ExitInfra
	}
	f.out.Log(n.Name, "info", fmt.Sprintf("%s: build: %s %s", n.Name, how, drv))
	sp.Drv = drv
	outs, err := f.outputs(ctx, drv)
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: build: %v", n.Name, err))
		return sp, s, ExitInfra
	}
	sp.Toplevel = strings.TrimSpace(outs)
	if f.offline {
		f.out.Log(n.Name, "info", fmt.Sprintf("%s: plan: offline: would be deployed unless it already runs nixos_conf %s", n.Name, n.NixosConf))
		return sp, s, ExitOK
	}
	t, err := f.open(n)
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: wait: %v", n.Name, err))
		return sp, s, ExitRefused
	}
	defer t.Close()
	s.target = t.Target()
	var stdout bytes.Buffer
	rctx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout+5*time.Second)
	defer cancel()
	if _, err := t.Run(rctx, effects.Command{Argv: []string{"readlink", "-f", "/run/current-system"}, Stdout: &stdout}); err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: wait: %v", n.Name, err))
		return sp, s, ExitInfra
	}
	s.current = strings.TrimSpace(stdout.String())
	sp.Changed = s.current != sp.Toplevel
	return sp, s, ExitOK
}
