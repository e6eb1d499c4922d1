package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/provider"
	"github.com/switchyard-nix/switchyard/tofu"
	"github.com/switchyard-nix/switchyard/transports/incus/clientconf"
	"github.com/switchyard-nix/switchyard/verdict"
)

// tfRun is an OpenTofu verb of the tf method (SPEC 7): apply, plan, destroy,
// refresh, run.
type tfRun struct {
	*fleet
	mr *methodRun
	ws *tofu.Workspace
	tf *tfexec.Terraform

	drvs   map[string]string // node to its toplevel derivation (apply, plan, run)
	locked atomic.Bool       // OpenTofu's -json stream said the state lock was held

	targets []*tfexec.TargetOption // a subset run's -target options
}

func (r *tfRun) json() bool { return r.mr.f.output == "json" }

func (r *tfRun) run(ctx context.Context) (int, error) {
	if r.mr.verb == "apply" && r.cfg.VerdictOnly {
		return r.verdictOnlyApply(ctx)
	}
	bin, err := tofu.Locate(ctx, r.mr.e.getenv)
	if errors.Is(err, tofu.ErrBadTofu) {
		return ExitRefused, fmt.Errorf("%w: %w", err, errRefused)
	} else if err != nil {
		return ExitInfra, err
	}
	// apply, plan and run hand the provider each node's derivation, evaluated through
	// the eval cache (so a plan and the apply after it evaluate once); destroy and
	// refresh change no node and evaluate nothing.
	if r.mr.verb == "apply" && r.mr.f.planIn != "" {
		// apply --plan FILE deploys only what was planned: another DEPLOYMENT or a
		// changed tree is refused before anything runs.
		if err := checkSavedPlan(r.mr.f.planIn, r.d, r.p); err != nil {
			return exitFor(err), err
		}
	}
	drvs := map[string]string{}
	if r.mr.verb == "apply" || r.mr.verb == "plan" || r.mr.verb == "run" {
		var code int
		if drvs, code = r.evaluateAll(ctx); code != ExitOK {
			return code, errors.New("evaluation failed")
		}
		r.drvs = drvs
	}
	nodes := make([]tofu.Node, 0, len(r.p.Nodes))
	for _, n := range r.p.Nodes {
		if r.m.Transport == method.Incus {
			i := n.Plan.Incus
			if i == nil {
				return ExitRefused, fmt.Errorf("%s: no incus settings: %w", n.Name, errRefused)
			}
			project := r.d.String("project")
			if r.m.TenantsOnly {
				project = tenantProject(r.d, n.Group)
			}
			nodes = append(nodes, tofu.Node{Name: n.Name, NixosConf: n.NixosConf, Drv: drvs[n.Name], Group: n.Group,
				Instance: instanceOf(i, project)})
			continue
		}
		s := n.Plan.SSH
		if s == nil {
			return ExitRefused, fmt.Errorf("%s: no ssh settings: %w", n.Name, errRefused)
		}
		nodes = append(nodes, tofu.Node{Name: n.Name, NixosConf: n.NixosConf, Drv: drvs[n.Name], Host: s.Host,
			Port: int(s.Port), User: s.User, HostKey: s.HostKey, KnownHostsFile: r.d.String("knownHostsFile")})
	}
	self, err := os.Executable()
	if err != nil {
		return ExitInfra, err
	}
	extra := map[string]string{}
	if key := r.d.String("sshKeyFile"); key != "" {
		extra[provider.EnvSSHKeyFile] = key
	}
	if r.m.Transport == method.Incus {
		// A remote that cannot be used is refused before OpenTofu runs.
		remote, keyFile := r.d.String("incusRemote"), r.d.String("incusClientKeyFile")
		if keyFile != "" {
			if _, err := clientconf.OpenWithKey(remote, keyFile); err != nil {
				return ExitRefused, fmt.Errorf("%w: %w", err, errRefused)
			}
			extra[provider.EnvIncusClientKeyFile] = keyFile
		} else if _, err := clientconf.Open(remote); err != nil {
			return ExitRefused, fmt.Errorf("incusRemote: %w: %w", err, errRefused)
		}
		extra[provider.EnvIncusRemote] = remote
	}
	var tenant *tofu.Tenant
	if r.m.TenantsOnly {
		coords := map[string]string{}
		if len(r.p.Nodes) > 0 {
			coords = r.p.Nodes[0].Plan.Coordinates
		}
		t, env, err := tenantOf(r.d, nodes, coords)
		if err != nil {
			return exitFor(err), err
		}
		tenant = t
		for k, v := range env {
			extra[k] = v
		}
		if r.mr.verb == "apply" || r.mr.verb == "destroy" {
			if err := tenantPreflight(ctx, t, env); err != nil {
				return ExitInfra, err
			}
		}
	}
	backend := tofu.Backend{Kind: r.d.String("stateBackend")}
	if backend.Kind == "pg" {
		file := r.d.String("pgConnStringFile")
		if file == "" {
			return ExitRefused, fmt.Errorf(`stateBackend "pg" needs the pgConnStringFile credential: %w`, errRefused)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return ExitRefused, fmt.Errorf("pgConnStringFile: cannot be read: %w", errRefused)
		}
		extra["PG_CONN_STR"] = strings.TrimSpace(string(b))
	}
	subset := r.mr.f.group != "" || len(r.mr.f.nodes) > 0
	r.ws, err = tofu.Prepare(tofu.Setup{StateDir: r.stateDir, Bin: bin, Self: self, Nodes: nodes,
		Backend: backend, Subset: subset, Environ: os.Environ(), Extra: extra, Tenant: tenant})
	if err != nil {
		return ExitInfra, fmt.Errorf("OpenTofu working directory: %w", err)
	}
	if r.tf, err = r.ws.Terraform(); err != nil {
		return ExitInfra, err
	}
	// terraform-exec asks the binary its version once and keeps it for its own checks.
	v, _, verr := r.tf.Version(ctx, false)
	ver, err := tofu.CheckVersion(v, verr)
	if err != nil {
		if r.mr.e.getenv(tofu.EnvTofu) != "" {
			return ExitRefused, fmt.Errorf("%w: %w", err, errRefused)
		}
		return ExitInfra, err
	}
	if err := r.init(ctx); err != nil {
		return ExitInfra, err
	}
	// Every verb here plans (run may), and planning reads the configuration's own
	// state: an empty one first, so the first run's self-read does not fail.
	r.tf.SetStdout(io.Discard) // state pull prints the state
	err = r.ws.Seed(ctx, r.tf, ver.String())
	r.streams()
	if err != nil {
		if lerr := r.lockRefusal(err); lerr != nil {
			return ExitRefused, lerr
		}
		return ExitInfra, fmt.Errorf("seeding an empty OpenTofu state: %s", oneLine(err))
	}
	if subset {
		// --group or --node: only these nodes' deployments are planned; the others
		// in the state are left as they are, not forgotten.
		for _, n := range nodes {
			r.targets = append(r.targets, tfexec.Target(tofu.Address(n.Name)))
			if n.Instance != nil {
				// So that destroy deletes the instance too (apply would take it in as
				// the deployment's dependency anyway).
				r.targets = append(r.targets, tfexec.Target(tofu.InstanceAddress(n.Name)))
			}
			if tenant != nil {
				// What follows the deploy: the identity and the pass after it (which
				// takes the entries and the agent in), the node's own records.
				for _, a := range tofu.TenantNodeAddresses(n.Name, tenant) {
					r.targets = append(r.targets, tfexec.Target(a))
				}
			}
		}
	}
	switch r.mr.verb {
	case "apply":
		return r.apply(ctx)
	case "plan":
		return r.plan(ctx)
	case "destroy":
		return r.simple(ctx, "destroy", func(w io.Writer) error {
			opts := targets[tfexec.DestroyOption](r.targets)
			if r.json() {
				return r.tf.DestroyJSON(ctx, w, opts...)
			}
			return r.tf.Destroy(ctx, opts...)
		})
	case "refresh":
		return r.simple(ctx, "refresh", func(w io.Writer) error {
			opts := targets[tfexec.RefreshCmdOption](r.targets)
			if r.json() {
				return r.tf.RefreshJSON(ctx, w, opts...)
			}
			return r.tf.Refresh(ctx, opts...)
		})
	case "run":
		return r.raw(ctx)
	}
	return ExitRefused, fmt.Errorf("verb %q not built", r.mr.verb)
}

// verdictOnlyApply is DEPLOY_VERDICT_ONLY=1 apply: the verdict-only pass on every
// node, as the verdict verb (SPEC 2), without OpenTofu. The pass changes nothing, so
// it is no deployment's create or update: through OpenTofu the state would record
// the submitted configuration as deployed, and the next apply would not deploy it.
func (r *tfRun) verdictOnlyApply(ctx context.Context) (int, error) {
	if r.mr.f.planIn != "" {
		// As the ssh method: a saved plan for another DEPLOYMENT or tree is refused.
		if err := checkSavedPlan(r.mr.f.planIn, r.d, r.p); err != nil {
			return exitFor(err), err
		}
	}
	return r.deploy(ctx, true), nil
}

// instanceOf is an Incus node's instance: its image and profiles, its limits as
// instance configuration, in the method's project.
func instanceOf(i *definition.Incus, project string) *tofu.Instance {
	profiles := i.Profiles
	if len(profiles) == 0 {
		profiles = []string{"default"}
	}
	config := map[string]string{}
	if i.Limits.CPU > 0 {
		config["limits.cpu"] = strconv.FormatInt(i.Limits.CPU, 10)
	}
	if i.Limits.Memory != "" {
		config["limits.memory"] = i.Limits.Memory
	}
	return &tofu.Instance{Project: project, Image: i.Image, Profiles: profiles, Config: config, Type: i.Type}
}

// evaluateAll evaluates every node through the eval cache.
func (r *tfRun) evaluateAll(ctx context.Context) (map[string]string, int) {
	drvs := map[string]string{}
	var mu sync.Mutex
	code := ExitOK
	slots := make(chan struct{}, r.width())
	var wg sync.WaitGroup
	for _, n := range r.p.Nodes {
		wg.Add(1)
		go func(n *plan.Node) {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			drv, how, err := r.evaluate(n)(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				r.out.Log(n.Name, "error", fmt.Sprintf("%s: build: evaluation failed: %v", n.Name, err))
				code = ExitInfra
				return
			}
			r.out.Log(n.Name, "info", fmt.Sprintf("%s: build: %s %s", n.Name, how, drv))
			drvs[n.Name] = drv
		}(n)
	}
	wg.Wait()
	return drvs, code
}

// streams points OpenTofu's human output at stderr (text mode) or nowhere (json
// mode, where the -json stream is turned into events instead).
func (r *tfRun) streams() {
	if r.json() {
		r.tf.SetStdout(io.Discard)
		r.tf.SetStderr(io.Discard)
		return
	}
	r.tf.SetStdout(r.mr.e.stderr)
	r.tf.SetStderr(r.mr.e.stderr)
}

func (r *tfRun) init(ctx context.Context) error {
	var out strings.Builder
	r.tf.SetStdout(&out)
	r.tf.SetStderr(&out)
	err := r.tf.Init(ctx, tofu.InitOptions()...)
	r.streams()
	if err != nil {
		return fmt.Errorf("tofu init failed: %v: %s", err, lastLines(out.String(), 3))
	}
	return nil
}

// events turns OpenTofu's -json lines into switchyard log events.
func (r *tfRun) events() (io.WriteCloser, func()) {
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			node, level, msg, ok := tofu.LogLine(sc.Bytes())
			if ok && strings.Contains(msg, lockMessage) {
				r.locked.Store(true)
			}
			if ok {
				r.out.Log(node, level, msg)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	return pw, func() { pw.Close(); <-done }
}

// simple runs a verb whose result is OpenTofu's own (destroy, refresh).
func (r *tfRun) simple(ctx context.Context, what string, do func(io.Writer) error) (int, error) {
	w, wait := r.events()
	err := do(w)
	wait()
	if lerr := r.lockRefusal(err); lerr != nil {
		return ExitRefused, lerr
	}
	if err != nil {
		return ExitInfra, fmt.Errorf("tofu %s failed: %s", what, oneLine(err))
	}
	r.out.Summary(len(r.p.Nodes), 0, 0, ExitOK)
	return ExitOK, nil
}

// apply is tofu apply, then a verdict per node from the state: exit 1 when a node's
// verdict failed, 3 when OpenTofu failed otherwise.
func (r *tfRun) apply(ctx context.Context) (int, error) {
	// What the state recorded before: a node whose recorded verdict is the same after
	// the apply was left alone by OpenTofu (SPEC 7), and is reported as unchanged, not
	// with its old verdict replayed as if it had just been switched. A state that
	// cannot be read here leaves every node reported as the state has it.
	before, _ := r.states(ctx)
	w, wait := r.events()
	var err error
	opts := targets[tfexec.ApplyOption](r.targets)
	if r.json() {
		err = r.tf.ApplyJSON(ctx, w, opts...)
	} else {
		err = r.tf.Apply(ctx, opts...)
	}
	wait()
	if lerr := r.lockRefusal(err); lerr != nil {
		return ExitRefused, lerr
	}
	states, serr := r.states(ctx)
	ok, failed, code := 0, 0, ExitOK
	for _, n := range r.p.Nodes {
		st, found := states[n.Name]
		if !found {
			failed++
			code = max(code, ExitInfra)
			continue
		}
		if b, ok := before[n.Name]; ok && b.recorded != "" && b.recorded == st.recorded {
			st.verdict.Switch = verdict.Switch{Result: verdict.SwitchUnchanged}
			st.verdict.PhasesMS = nil
			r.out.Log(n.Name, "info", n.Name+": unchanged: OpenTofu left it alone; the units are as its last deploy judged them")
		}
		r.out.Verdict(st.verdict)
		if st.exitCode == ExitOK {
			ok++
		} else {
			failed++
		}
		code = max(code, st.exitCode)
	}
	if err != nil && code == ExitOK {
		code = ExitInfra
	}
	if serr != nil {
		code = max(code, ExitInfra)
		r.out.Log("", "error", fmt.Sprintf("switchyard %s apply: reading the state: %s", r.m.Name, oneLine(serr)))
	}
	if err != nil {
		// Each failed node's error is in OpenTofu's output, naming the node.
		r.out.Log("", "error", fmt.Sprintf("switchyard %s apply: tofu apply failed: %s", r.m.Name, strings.TrimSpace(oneLine(err))))
	}
	r.out.Summary(len(r.p.Nodes), ok, failed, code)
	return code, nil
}

type nodeState struct {
	verdict  verdict.Verdict
	recorded string // the verdict as the state holds it
	exitCode int
}

// states reads each node's recorded verdict from the state.
func (r *tfRun) states(ctx context.Context) (map[string]nodeState, error) {
	r.tf.SetStdout(io.Discard)
	raw, err := r.tf.StatePull(ctx)
	r.streams()
	if err != nil {
		return nil, err
	}
	deployments, err := tofu.Deployments([]byte(raw))
	if err != nil {
		return nil, err
	}
	if r.m.TenantsOnly {
		// The node's verdict is the pass's after registration (SPEC 7.1); a node
		// the graph stopped before it has its deploy's.
		passes, err := tofu.Resources([]byte(raw), tofu.VerdictType)
		if err != nil {
			return nil, err
		}
		for node, attrs := range passes {
			if d, ok := deployments[node]; ok {
				d["verdict"], d["exit_code"] = attrs["verdict"], attrs["exit_code"]
			}
		}
	}
	out := map[string]nodeState{}
	for node, attrs := range deployments {
		var st nodeState
		if v, _ := attrs["verdict"].(string); v != "" {
			st.recorded = v
			if err := json.Unmarshal([]byte(v), &st.verdict); err != nil {
				return nil, fmt.Errorf("%s: verdict in state: %w", node, err)
			}
		}
		st.exitCode = tofu.Int(attrs["exit_code"])
		if st.verdict.Node == "" {
			st.verdict.Node = node
		}
		out[node] = st
	}
	return out, nil
}

// plan is tofu plan into a saved plan, then which nodes would change, read from the
// machine-readable plan.
func (r *tfRun) plan(ctx context.Context) (int, error) {
	w, wait := r.events()
	planFile := r.ws.Dir + "/switchyard.tfplan"
	var err error
	opts := append(targets[tfexec.PlanOption](r.targets), tfexec.Out(planFile))
	if r.json() {
		_, err = r.tf.PlanJSON(ctx, w, opts...)
	} else {
		_, err = r.tf.Plan(ctx, opts...)
	}
	wait()
	if lerr := r.lockRefusal(err); lerr != nil {
		return ExitRefused, lerr
	}
	if err != nil {
		return ExitInfra, fmt.Errorf("tofu plan failed: %s", oneLine(err))
	}
	r.tf.SetStdout(io.Discard)
	p, err := r.tf.ShowPlanFile(ctx, planFile)
	r.streams()
	if err != nil {
		return ExitInfra, fmt.Errorf("tofu show of the plan: %s", oneLine(err))
	}
	changed := tofu.ChangedNodes(p)
	saved := savedPlan{DeploymentHash: r.d.Hash, Method: r.m.Name, Deployment: r.d.Public(), Nodes: map[string]savedPlanNode{}}
	n := 0
	for _, node := range r.p.Nodes {
		c, found := changed[node.Name]
		c = c || !found
		if c {
			n++
		}
		saved.Nodes[node.Name] = savedPlanNode{NixosConf: node.NixosConf, Drv: r.drvs[node.Name], Changed: c}
		r.out.Plan(node.Name, node.NixosConf, c)
	}
	if out := r.mr.f.planOut; out != "" {
		b, err := json.MarshalIndent(saved, "", "  ")
		if err != nil {
			return ExitInfra, err
		}
		if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
			return ExitInfra, fmt.Errorf("--out: %w", err)
		}
	}
	r.out.Summary(len(r.p.Nodes), len(r.p.Nodes)-n, n, ExitOK)
	return ExitOK, nil
}

// raw is `run -- <args>`: OpenTofu with the generated configuration; its exit code
// other than 0 is exit 3.
func (r *tfRun) raw(ctx context.Context) (int, error) {
	cmd := r.ws.Command(r.mr.f.tofuArgs...)
	cmd.Stdin = r.mr.e.stdin
	cmd.Stdout, cmd.Stderr = r.mr.e.stdout, r.mr.e.stderr
	if r.json() {
		// stdout holds JSON Lines only: OpenTofu's output goes to stderr.
		cmd.Stdout = r.mr.e.stderr
	}
	err := cmd.Run()
	var ee *exec.ExitError
	code := ExitOK
	if errors.As(err, &ee) {
		code = ExitInfra
		err = fmt.Errorf("tofu %s: exit %d", strings.Join(r.mr.f.tofuArgs, " "), ee.ExitCode())
	} else if err != nil {
		code = ExitInfra
	}
	if r.json() && err == nil {
		r.out.Summary(len(r.p.Nodes), 0, 0, code)
	}
	return code, err
}

// targets gives the -target options as the option type of one command.
func targets[O any](ts []*tfexec.TargetOption) []O {
	out := make([]O, 0, len(ts))
	for _, t := range ts {
		out = append(out, any(t).(O))
	}
	return out
}

const lockMessage = "acquiring the state lock"

// lockRefusal turns OpenTofu's "Error acquiring the state lock" into a refusal
// (exit 2): another run holds the state, and nothing was changed by this one.
func (r *tfRun) lockRefusal(err error) error {
	if err == nil || !(r.locked.Load() || strings.Contains(err.Error(), lockMessage)) {
		return nil
	}
	return fmt.Errorf("refused: the OpenTofu state is locked by another run (try again when it has finished): %w", errRefused)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " ")
}
