package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/evalcache"
	"github.com/switchyard-nix/switchyard/plan/merge"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/transports/incus"
	"github.com/switchyard-nix/switchyard/transports/ssh"
	"github.com/switchyard-nix/switchyard/verdict"
)

// fleet runs a method's verbs over the planned nodes.
type fleet struct {
	m        method.Method
	d        *merge.Deployment
	p        *plan.Plan
	cfg      effects.Config
	out      Output
	parallel int
	stateDir string
}

func (f *fleet) width() int {
	if f.parallel > 0 {
		return f.parallel
	}
	if n := f.d.Int("parallel"); n > 0 {
		return int(n)
	}
	return 8
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
		project := f.d.String("project")
		if f.m.TenantsOnly {
			project = tenantProject(f.d, n.Group)
		}
		return incus.New(incus.Config{Instance: n.Name, Project: project, Remote: f.d.String("incusRemote"),
			KeyFile: f.d.String("incusClientKeyFile")})
	}
	s := n.Plan.SSH
	if s == nil {
		return nil, fmt.Errorf("%s: no ssh settings", n.Name)
	}
	cfg := ssh.Config{User: s.User, Host: s.Host, Port: int(s.Port), HostKey: s.HostKey,
		KnownHostsFile: f.d.String("knownHostsFile")}
	if key := f.d.String("sshKeyFile"); key != "" {
		cfg.KeyFiles = []string{key}
	}
	return ssh.New(cfg)
}

// evaluate gives a node's toplevel derivation through the eval cache.
func (f *fleet) evaluate(n *plan.Node) func(context.Context) (string, string, error) {
	cache := evalcache.Open(f.cfg.EvalCacheDir, nil)
	return func(ctx context.Context) (string, string, error) {
		drv, hit, err := cache.Resolve(ctx, n.NixosConf, func(ctx context.Context) (string, error) {
			// Without the caller's environment: nixos_conf, the cache key, does not cover it.
			out, err := localIn(ctx, plan.EvalEnv(os.LookupEnv), n.EvalArgv())
			return strings.TrimSpace(out), err
		})
		if hit {
			return drv, "eval cache hit", err
		}
		return drv, "evaluated", err
	}
}

// local runs a command on this machine; an error carries stderr's last line.
func local(ctx context.Context, argv []string) (string, error) { return localIn(ctx, nil, argv) }

// localIn is local with the environment env (nil: this process's).
func localIn(ctx context.Context, env, argv []string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr, cmd.Env = &stdout, &stderr, env
	if err := cmd.Run(); err != nil {
		tail := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
		return "", fmt.Errorf("%s: %w: %s", argv[0], err, tail)
	}
	return stdout.String(), nil
}

// deploy is apply (the deploy pass, skipping nodes already running their toplevel)
// or verdict (the verdict-only pass) on every planned node.
func (f *fleet) deploy(ctx context.Context, verdictOnly bool) int {
	cfg := f.cfg
	cfg.VerdictOnly = cfg.VerdictOnly || verdictOnly
	var deploys []*effects.Deploy
	var closers []effects.Transport
	codes := map[string]int{}
	for _, n := range f.p.Nodes {
		t, err := f.transport(n)
		if err != nil {
			f.out.Log(n.Name, "error", fmt.Sprintf("%s: wait: %v", n.Name, err))
			codes[n.Name] = ExitRefused
			continue
		}
		closers = append(closers, t)
		deploys = append(deploys, &effects.Deploy{Node: n.Name, Transport: t, Config: cfg, Reporter: f.out,
			Source: effects.Source{Evaluate: f.evaluate(n)}, SkipUnchanged: true})
	}
	defer func() {
		for _, t := range closers {
			t.Close()
		}
	}()
	results := effects.RunFleet(ctx, deploys, f.width())
	ok, failed, code := 0, 0, 0
	for _, c := range codes {
		failed++
		code = max(code, c)
	}
	byName := map[string]*plan.Node{}
	for _, n := range f.p.Nodes {
		byName[n.Name] = n
	}
	for _, r := range results {
		if r.ExitCode == ExitOK {
			ok++
		} else {
			failed++
		}
		code = max(code, r.ExitCode)
		if !cfg.VerdictOnly {
			if err := writeReceipt(byName[r.Verdict.Node], r.Verdict); err != nil {
				f.out.Log(r.Verdict.Node, "warn", fmt.Sprintf("%s: receipt: %v", r.Verdict.Node, err))
			}
		}
	}
	f.out.Summary(len(f.p.Nodes), ok, failed, code)
	return code
}

// receipt is what apply records per node under the state dir.
type receipt struct {
	Node      string          `json:"node"`
	NixosConf string          `json:"nixos_conf"`
	Toplevel  string          `json:"toplevel"`
	Verdict   verdict.Verdict `json:"verdict"`
	Time      time.Time       `json:"time"`
}

func writeReceipt(n *plan.Node, v verdict.Verdict) error {
	if n == nil {
		return nil
	}
	b, err := json.MarshalIndent(receipt{Node: n.Name, NixosConf: n.NixosConf, Toplevel: v.Toplevel, Verdict: v, Time: time.Now().UTC()}, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(n.Dir, "receipt.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(n.Dir, "receipt.json"))
}

// savedPlan is `plan --out FILE`: what `apply --plan FILE` must deploy exactly.
type savedPlan struct {
	DeploymentHash string                   `json:"deployment_hash"`
	Method         string                   `json:"method"`
	Deployment     map[string]any           `json:"deployment"`
	Nodes          map[string]savedPlanNode `json:"nodes"`
}

type savedPlanNode struct {
	NixosConf string `json:"nixos_conf"`
	Drv       string `json:"drv"`
	Toplevel  string `json:"toplevel"`
	Changed   bool   `json:"changed"`
}

// plan evaluates every node (through the eval cache, so the apply that follows does
// not evaluate again), and asks each node which toplevel it runs.
func (f *fleet) plan(ctx context.Context, out string) (int, error) {
	saved := savedPlan{DeploymentHash: f.d.Hash, Method: f.m.Name, Deployment: f.d.Public(), Nodes: map[string]savedPlanNode{}}
	var mu sync.Mutex
	code := ExitOK
	slots := make(chan struct{}, f.width())
	var wg sync.WaitGroup
	for _, n := range f.p.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			sp, c := f.planNode(ctx, n)
			mu.Lock()
			defer mu.Unlock()
			saved.Nodes[n.Name] = sp
			code = max(code, c)
		}()
	}
	wg.Wait()
	for _, n := range f.p.Nodes {
		f.out.Plan(n.Name, n.NixosConf, saved.Nodes[n.Name].Changed)
	}
	if out != "" {
		b, err := json.MarshalIndent(saved, "", "  ")
		if err != nil {
			return ExitInfra, err
		}
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			return ExitInfra, fmt.Errorf("--out: %w", err)
		}
	}
	changed := 0
	for _, sp := range saved.Nodes {
		if sp.Changed {
			changed++
		}
	}
	f.out.Summary(len(f.p.Nodes), len(f.p.Nodes)-changed, changed, code)
	return code, nil
}

func (f *fleet) planNode(ctx context.Context, n *plan.Node) (savedPlanNode, int) {
	sp := savedPlanNode{NixosConf: n.NixosConf, Changed: true}
	drv, how, err := f.evaluate(n)(ctx)
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: build: evaluation failed: %v", n.Name, err))
		return sp, ExitInfra
	}
	f.out.Log(n.Name, "info", fmt.Sprintf("%s: build: %s %s", n.Name, how, drv))
	sp.Drv = drv
	outs, err := local(ctx, []string{"nix-store", "--query", "--outputs", "--", drv})
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: build: %v", n.Name, err))
		return sp, ExitInfra
	}
	sp.Toplevel = strings.TrimSpace(outs)
	t, err := f.transport(n)
	if err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: wait: %v", n.Name, err))
		return sp, ExitRefused
	}
	defer t.Close()
	var stdout bytes.Buffer
	rctx, cancel := context.WithTimeout(ctx, f.cfg.WaitTimeout+5*time.Second)
	defer cancel()
	if _, err := t.Run(rctx, effects.Command{Argv: []string{"readlink", "-f", "/run/current-system"}, Stdout: &stdout}); err != nil {
		f.out.Log(n.Name, "error", fmt.Sprintf("%s: wait: %v", n.Name, err))
		return sp, ExitInfra
	}
	sp.Changed = strings.TrimSpace(stdout.String()) != sp.Toplevel
	return sp, ExitOK
}

// checkSavedPlan refuses an apply whose DEPLOYMENT or nodes differ from the saved plan.
func checkSavedPlan(file string, d *merge.Deployment, p *plan.Plan) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("--plan: %v: %w", err, errRefused)
	}
	var saved savedPlan
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("--plan: not a saved plan: %v: %w", err, errRefused)
	}
	if saved.DeploymentHash != d.Hash {
		return fmt.Errorf("DEPLOYMENT differs from the planned one (deployment_hash %.12s, planned %.12s): the apply deploys only what was planned: %w",
			d.Hash, saved.DeploymentHash, errRefused)
	}
	if saved.Method != d.Method.Name {
		return fmt.Errorf("--plan: planned for method %s: %w", saved.Method, errRefused)
	}
	if len(saved.Nodes) != len(p.Nodes) {
		return fmt.Errorf("--plan: planned %d nodes, now %d: %w", len(saved.Nodes), len(p.Nodes), errRefused)
	}
	for _, n := range p.Nodes {
		sp, ok := saved.Nodes[n.Name]
		if !ok {
			return fmt.Errorf("%s: not in the plan: %w", n.Name, errRefused)
		}
		if sp.NixosConf != n.NixosConf {
			return fmt.Errorf("%s: nixos_conf differs from the plan (the tree changed since): %w", n.Name, errRefused)
		}
	}
	return nil
}
