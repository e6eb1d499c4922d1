package methods

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-version"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan"
	"github.com/switchyard-nix/switchyard/plan/definition"
	"github.com/switchyard-nix/switchyard/plan/method"
	"github.com/switchyard-nix/switchyard/pool"
	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/rollout"
	"github.com/switchyard-nix/switchyard/tofu"
	"github.com/switchyard-nix/switchyard/transports/incus/clientconf"
	"github.com/switchyard-nix/switchyard/verdict"
)

// tfRun is an OpenTofu verb of the tf method (SPEC 7): apply, plan, destroy,
// refresh, run.
type tfRun struct {
	*fleet
	req     Request
	session *tofu.Session // OpenTofu in the run's working directory

	drvs   map[string]string // node to its toplevel derivation (apply, plan, run)
	locked atomic.Bool       // OpenTofu's -json stream said the state lock was held

	targets []string // a subset run's -target addresses
	before  []byte   // the state before this run, when read to lay the nodes out

	logs *bodyLogs // the deploy bodies' log lines (apply, run); nil: none

	receiptKeyFile string            // the receipt key the provider signs with ("": unsigned)
	pub            ed25519.PublicKey // receipts verify's key
}

// run is a tf method's verb: the nodes' inputs, OpenTofu's working directory, the
// layout of the graph, then the verb itself.
func (r *tfRun) run(ctx context.Context) (int, error) {
	if r.req.Verb == "apply" && r.cfg.VerdictOnly {
		return r.verdictOnlyApply(ctx)
	}
	bin, err := tofu.Locate(ctx, r.req.Getenv)
	if errors.Is(err, tofu.ErrBadTofu) {
		return ExitRefused, fmt.Errorf("%w: %w", err, ErrRefused)
	} else if err != nil {
		return ExitInfra, err
	}
	subset := r.req.Subset()
	nodes, code, err := r.inputs(ctx, subset)
	if err != nil {
		return code, err
	}
	run, code, err := r.providerRun()
	if err != nil {
		return code, err
	}
	run.LogSocket = r.listenBodyLogs()
	defer r.logs.closeWait()
	tenant, code, err := r.tenant(ctx, nodes, &run)
	if err != nil {
		return code, err
	}
	setup := tofu.Setup{StateDir: r.req.StateDir, Bin: bin, Nodes: nodes, Subset: subset,
		Environ: os.Environ(), Run: run, Tenant: tenant}
	if code, err := r.open(ctx, setup); err != nil {
		return code, err
	}
	if code, err := r.submissions(ctx); err != nil {
		return code, err
	}
	if err := r.layout(ctx, subset); errors.Is(err, ErrRefused) {
		return ExitRefused, err
	} else if err != nil {
		return ExitInfra, err
	}
	if subset {
		r.target(nodes, tenant)
	}
	return r.verb(ctx)
}

// inputs are the nodes' deployments OpenTofu gets. apply, plan and run hand the
// provider each node's derivation, evaluated through the eval cache (so a plan and the
// apply after it evaluate once); destroy and refresh change no node and evaluate
// nothing. A saved plan that is not this run's, or a rollout of a subset asked for,
// is refused first.
func (r *tfRun) inputs(ctx context.Context, subset bool) ([]tofu.Node, int, error) {
	if r.req.Verb == "apply" && r.req.PlanIn != "" {
		// apply --plan FILE deploys only what was planned: another DEPLOYMENT or a
		// changed tree is refused before anything runs.
		if err := checkSavedPlan(r.req.PlanIn, r.d, r.p); err != nil {
			return nil, exitFor(err), err
		}
	}
	if r.m.Staged() && (r.req.Verb == "apply" || r.req.Verb == "plan") {
		// plan lays the graph out as apply would, from the rollout setting.
		if err := r.setRollout(r.req.Rollout); err != nil {
			return nil, exitFor(err), err
		}
		if r.rollout.Enabled() && subset {
			if r.req.Rollout != "" {
				return nil, ExitRefused, fmt.Errorf("--rollout: a staged rollout covers the whole tree: run it without --group and --node: %w", ErrRefused)
			}
			r.out.Log("", "info", "rollout: not staged: --group and --node deploy the nodes they pick at once")
			r.rollout = rollout.Spec{}
		}
	}
	drvs := map[string]string{}
	if r.req.Verb == "apply" || r.req.Verb == "plan" || r.req.Verb == "run" {
		var code int
		if drvs, code = r.evaluateAll(ctx); code != ExitOK {
			return nil, code, errors.New("evaluation failed")
		}
		r.drvs = drvs
	}
	nodes, err := r.tofuNodes(drvs)
	if err != nil {
		return nil, ExitRefused, err
	}
	return nodes, ExitOK, nil
}

// listenBodyLogs is the socket the provider sends the deploy bodies' log lines to
// (contract.Run.LogSocket), for the verbs that deploy: apply and run; "" for the
// others, or when it cannot be made (the lines then stay in the provider log).
func (r *tfRun) listenBodyLogs() string {
	if r.req.Verb != "apply" && r.req.Verb != "run" {
		return ""
	}
	logs, err := listenBodyLogs(r.out)
	if err != nil {
		r.out.Log("", "warn", fmt.Sprintf("the deploy bodies' log lines stay in the provider log: %v", err))
		return ""
	}
	r.logs = logs
	return logs.path()
}

// tenant is tf-incus-operator's part of the graph (nil for the other methods), its
// DNS key put into run; before an apply or a destroy, its servers are asked first.
func (r *tfRun) tenant(ctx context.Context, nodes []tofu.Node, run *contract.Run) (*tofu.Tenant, int, error) {
	if !r.m.TenantsOnly {
		return nil, ExitOK, nil
	}
	coords := map[string]string{}
	if len(r.p.Nodes) > 0 {
		coords = r.p.Nodes[0].Plan.Coordinates
	}
	t, err := tenantOf(r.d, nodes, coords, run)
	if err != nil {
		return nil, exitFor(err), err
	}
	if r.req.Verb == "apply" || r.req.Verb == "destroy" {
		if err := tenantPreflight(ctx, t, *run); err != nil {
			return nil, ExitInfra, err
		}
	}
	return t, ExitOK, nil
}

// open makes OpenTofu's working directory for setup (with the state backend of the
// tree), checks OpenTofu's version, initialises the directory and seeds an empty
// state where there is none.
func (r *tfRun) open(ctx context.Context, setup tofu.Setup) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return ExitInfra, err
	}
	setup.Self = self
	setup.Backend = tofu.Backend{Kind: r.s.StateBackend}
	setup.Extra = map[string]string{}
	if setup.Backend.Kind == "pg" {
		file := r.s.PgConnStringFile
		if file == "" {
			return ExitRefused, fmt.Errorf(`stateBackend "pg" needs the pgConnStringFile credential: %w`, ErrRefused)
		}
		conn, err := tofu.ReadConnString(file)
		if err != nil {
			return ExitRefused, fmt.Errorf("%w: %w", err, ErrRefused)
		}
		setup.Extra["PG_CONN_STR"] = conn
	}
	ws, err := tofu.Prepare(setup)
	if err != nil {
		return ExitInfra, fmt.Errorf("OpenTofu working directory: %w", err)
	}
	if r.session, err = ws.Session(r.humanOutput()); err != nil {
		return ExitInfra, err
	}
	ver, code, err := r.version(ctx)
	if err != nil {
		return code, err
	}
	if err := r.session.Init(ctx); err != nil {
		return ExitInfra, err
	}
	// Every verb here plans (run may), and planning reads the configuration's own
	// state: an empty one first, so the first run's self-read does not fail.
	if err := r.session.Seed(ctx, ver.String()); err != nil {
		if lerr := lockRefusal(r.locked.Load(), err); lerr != nil {
			return ExitRefused, lerr
		}
		return ExitInfra, fmt.Errorf("seeding an empty OpenTofu state: %s", oneLine(err))
	}
	return ExitOK, nil
}

// version is OpenTofu's version, asked once per binary (terraform-exec would ask it
// before its first command of every run; apply runs without it, see
// tofu.Session.Version). One too old is refused when the user named the binary.
func (r *tfRun) version(ctx context.Context) (*version.Version, int, error) {
	ver, err := r.session.Version(ctx)
	if err == nil {
		return ver, ExitOK, nil
	}
	if r.req.Getenv(tofu.EnvTofu) != "" {
		return nil, ExitRefused, fmt.Errorf("%w: %w", err, ErrRefused)
	}
	return nil, ExitInfra, err
}

// target is a subset run's -target options (--group or --node): only these nodes'
// deployments are planned; the others in the state are left as they are, not
// forgotten.
func (r *tfRun) target(nodes []tofu.Node, tenant *tofu.Tenant) {
	addrs := subsetAddresses(nodes, tenant, r.session.Layout())
	if r.req.Verb == "apply" || r.req.Verb == "plan" {
		// The groups' applied submissions change with apply; a subset destroy
		// keeps them.
		addrs = append(addrs, tofu.AppliedAddress)
	}
	r.targets = addrs
}

// verb runs the verb in the prepared working directory.
func (r *tfRun) verb(ctx context.Context) (int, error) {
	switch r.req.Verb {
	case "apply":
		return r.apply(ctx)
	case "plan":
		return r.plan(ctx)
	case "destroy":
		return r.simple(ctx, "destroy", r.session.Destroy)
	case "refresh":
		return r.simple(ctx, "refresh", r.session.Refresh)
	case "run":
		return r.raw(ctx)
	case "receipts":
		return r.receiptsVerb(ctx)
	}
	return ExitRefused, fmt.Errorf("verb %q not built", r.req.Verb)
}

// verdictOnlyApply is DEPLOY_VERDICT_ONLY=1 apply: the verdict-only pass on every
// node, as the verdict verb (SPEC 2), without OpenTofu. The pass changes nothing, so
// it is no deployment's create or update: through OpenTofu the state would record
// the submitted configuration as deployed, and the next apply would not deploy it.
func (r *tfRun) verdictOnlyApply(ctx context.Context) (int, error) {
	if r.req.PlanIn != "" {
		// As the ssh method: a saved plan for another DEPLOYMENT or tree is refused.
		if err := checkSavedPlan(r.req.PlanIn, r.d, r.p); err != nil {
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

// tofuNodes is the planned nodes as the OpenTofu configuration's: an Incus node's
// instance in its project, an SSH node's address and host key.
func (f *fleet) tofuNodes(drvs map[string]string) ([]tofu.Node, error) {
	nodes := make([]tofu.Node, 0, len(f.p.Nodes))
	for _, n := range f.p.Nodes {
		if f.m.Transport == method.Incus {
			i := n.Plan.Incus
			if i == nil {
				return nil, fmt.Errorf("%s: no incus settings: %w", n.Name, ErrRefused)
			}
			nodes = append(nodes, tofu.Node{Name: n.Name, NixosConf: n.NixosConf, Drv: drvs[n.Name], Group: n.Group,
				Instance: instanceOf(i, f.projectOf(n))})
			continue
		}
		s := n.Plan.SSH
		if s == nil {
			return nil, fmt.Errorf("%s: no ssh settings: %w", n.Name, ErrRefused)
		}
		nodes = append(nodes, tofu.Node{Name: n.Name, NixosConf: n.NixosConf, Drv: drvs[n.Name], Host: s.Host,
			Port: int(s.Port), User: s.User, HostKey: s.HostKey, KnownHostsFile: f.s.KnownHostsFile})
	}
	return nodes, nil
}

// subsetAddresses is what a subset run (--group, --node) targets: each node's
// deployment, its instance (so that destroy deletes it too; apply would take it in as
// the deployment's dependency anyway), and a tenant's node resources after the deploy
// (the identity, the pass after it, the node's own records).
func subsetAddresses(nodes []tofu.Node, tenant *tofu.Tenant, layout tofu.Layout) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, layout.Address(n.Name))
		if n.Instance != nil {
			out = append(out, tofu.InstanceAddress(n.Name))
		}
		if tenant != nil {
			out = append(out, tofu.TenantNodeAddresses(n.Name, tenant)...)
		}
	}
	return out
}

// layout places the nodes' deployments in the configuration once the state can be
// read. A staged rollout (apply, and plan showing what apply would do) gives every
// node a block of its own, ordered by stages of the nodes that change: those whose
// deployment or Incus instance a refreshed plan changes (another derivation, a
// failed or held verdict, a node that drifted, new limits), or that the state
// lacks; one whose instance changes must be in the first stage. A
// subset run keeps every node where the state holds it: OpenTofu refuses to move a
// resource that is not targeted. Other runs keep the shared block, which takes the
// nodes of a past rollout back (moved blocks).
func (r *tfRun) layout(ctx context.Context, subset bool) error {
	if !subset && !r.rollout.Enabled() {
		return nil
	}
	if subset {
		own, err := tofu.OwnBlocks(r.before)
		if err != nil || len(own) == 0 {
			return err
		}
		return r.session.Relayout(tofu.Layout{Own: own})
	}
	plan, err := r.refreshedPlan(ctx)
	if err != nil {
		return err
	}
	planned, instances := tofu.ChangedNodes(plan), tofu.ChangedInstances(plan)
	var names []string
	changed := map[string]bool{}
	for _, n := range r.p.Nodes {
		names = append(names, n.Name)
		c, found := planned[n.Name]
		changed[n.Name] = c || !found || instances[n.Name]
	}
	stages := rollout.Stages(names, changed, r.rollout)
	if err := instancesOutsideCanary(stages, instances); err != nil {
		return err
	}
	for _, st := range stages {
		r.out.Log("", "info", fmt.Sprintf("rollout: %s of %d: %s", stageName(st), len(stages), strings.Join(st.Nodes, ", ")))
	}
	return r.session.Relayout(tofu.Staged(stages))
}

// instancesOutsideCanary refuses a rollout whose plan changes the Incus instances
// of nodes outside its first stage (issue 31 item 3): OpenTofu applies an instance
// change (limits, profiles, image, type) when the graph reaches it, which is at the
// start of the apply, before the canary is judged, and an image change recreates the
// instance and replaces its deployment, so a rollout would not hold those nodes.
func instancesOutsideCanary(stages []rollout.Stage, instances map[string]bool) error {
	var outside []string
	for _, st := range stages[min(1, len(stages)):] {
		for _, n := range st.Nodes {
			if instances[n] {
				outside = append(outside, n)
			}
		}
	}
	if len(outside) == 0 {
		return nil
	}
	return fmt.Errorf("--rollout: the plan changes the Incus instances of %s, outside the rollout's first stage: "+
		"OpenTofu would change them before the canary is judged; apply the instance change without --rollout: %w", strings.Join(outside, ", "), ErrRefused)
}

// refreshedPlan is a plan of the configuration as it stands (refreshed: every
// deployment's Read asks its node): the deployments it changes are what a rollout
// stages. The state alone is a record: a node rolled back by hand since the last
// apply still reads as on its generation there, and would land in the first stage,
// past the canary (issue 31 item 2). The plan is the operator's to see in the
// apply; this one is not streamed.
func (r *tfRun) refreshedPlan(ctx context.Context) (*tfjson.Plan, error) {
	planFile := r.session.File("switchyard-rollout.tfplan")
	defer os.Remove(planFile)
	quiet := r.session.Silent()
	err := quiet.Plan(ctx, tofu.PlanOptions{Out: planFile, Options: tofu.Options{Parallelism: r.width()}})
	if lerr := lockRefusal(false, err); lerr != nil {
		return nil, lerr
	}
	if err != nil {
		return nil, fmt.Errorf("rollout: the plan its stages come from: %s", oneLine(err))
	}
	p, err := quiet.ShowPlan(ctx, planFile)
	if err != nil {
		return nil, fmt.Errorf("rollout: tofu show of the plan its stages come from: %s", oneLine(err))
	}
	return p, nil
}

// submissions reads the state before the run (r.before) and, from it, the groups'
// applied submissions (SPEC 6.9), which the configuration keeps: apply refuses a
// signed submission superseded on one of its groups (unless --allow-older) and makes
// it the groups' current one; every other verb keeps them as they are.
func (r *tfRun) submissions(ctx context.Context) (int, error) {
	raw, err := r.session.ReadState(ctx)
	if err != nil {
		return ExitInfra, fmt.Errorf("reading the state: %s", oneLine(err))
	}
	r.before = raw
	a, err := tofu.Applied(raw)
	if err != nil {
		return ExitInfra, err
	}
	if r.req.Verb == "apply" {
		if err := applied(a).apply(planGroups(r.p), r.signer, r.req.AllowOlder); err != nil {
			return ExitRefused, err
		}
	}
	if err := r.session.SetApplied(a); err != nil {
		return ExitInfra, err
	}
	return ExitOK, nil
}

// evaluateAll evaluates every node through the eval cache.
func (r *tfRun) evaluateAll(ctx context.Context) (map[string]string, int) {
	type evaluated struct {
		drv, how string
		err      error
	}
	results := pool.Map(ctx, r.p.Nodes, r.width(), func(ctx context.Context, n *plan.Node) evaluated {
		drv, how, err := r.evaluate(ctx, n)
		return evaluated{drv, how, err}
	})
	drvs := map[string]string{}
	code := ExitOK
	for i, n := range r.p.Nodes {
		e := results[i]
		if e.err != nil {
			r.out.Log(n.Name, "error", fmt.Sprintf("%s: build: evaluation failed: %v", n.Name, e.err))
			code = ExitInfra
			continue
		}
		r.out.Log(n.Name, "info", fmt.Sprintf("%s: build: %s %s", n.Name, e.how, e.drv))
		drvs[n.Name] = e.drv
	}
	return drvs, code
}

// humanOutput is where OpenTofu's human output goes: stderr in text mode, nowhere
// in json mode (where its -json stream is turned into events instead).
func (r *tfRun) humanOutput() (stdout, stderr io.Writer) {
	if r.req.JSON {
		return nil, nil
	}
	return r.req.Stderr, r.req.Stderr
}

// options are OpenTofu's options of a verb over the run's targets: in json mode, its
// -json stream to events.
func (r *tfRun) options(events io.Writer) tofu.Options {
	o := tofu.Options{Targets: r.targets, Parallelism: r.width()}
	if r.req.JSON {
		o.Events = events
	}
	return o
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
			if l, ok := tofu.LogLine(sc.Bytes()); ok {
				if l.Locked {
					r.locked.Store(true)
				}
				r.out.Log(l.Node, l.Level, l.Msg)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	return pw, func() { pw.Close(); <-done }
}

// simple runs a verb whose result is OpenTofu's own (destroy, refresh).
func (r *tfRun) simple(ctx context.Context, what string, do func(context.Context, tofu.Options) error) (int, error) {
	w, wait := r.events()
	err := do(ctx, r.options(w))
	wait()
	if lerr := lockRefusal(r.locked.Load(), err); lerr != nil {
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
	var before map[string]nodeState
	if r.before != nil {
		before, _ = readStates(r.before, r.m.TenantsOnly)
	} else {
		before, _ = r.states(ctx)
	}
	w, wait := r.events()
	err := r.session.Apply(ctx, r.options(w))
	wait()
	r.logs.closeWait() // the bodies' lines before the verdicts
	if lerr := lockRefusal(r.locked.Load(), err); lerr != nil {
		return ExitRefused, lerr
	}
	states, serr := r.states(ctx)
	return tallyApply(r.out, r.m.Name, r.p.Nodes, before, states, err, serr), nil
}

// tallyApply reports each node's verdict after an apply, as the state holds it, and
// gives the exit code: 1 when a node's verdict failed, 3 when a node is missing from
// the state, the state cannot be read, or OpenTofu failed otherwise. A node whose
// recorded verdict is the one recorded before the apply was left alone: it is
// reported as unchanged.
func tallyApply(out Reporter, methodName string, nodes []*plan.Node, before, states map[string]nodeState, applyErr, stateErr error) int {
	ok, failed, code := 0, 0, ExitOK
	for _, n := range nodes {
		st, found := states[n.Name]
		if !found {
			failed++
			code = max(code, ExitInfra)
			continue
		}
		if b, ok := before[n.Name]; ok && b.recorded != "" && b.recorded == st.recorded && st.verdict.Switch.Result != verdict.SwitchHeld {
			st.verdict.Switch = verdict.Switch{Result: verdict.SwitchUnchanged}
			st.verdict.PhasesMS = nil
			out.Log(n.Name, "info", n.Name+": unchanged: OpenTofu left it alone; the units are as its last deploy judged them")
		}
		out.Verdict(st.verdict)
		if st.exitCode == ExitOK {
			ok++
		} else {
			failed++
		}
		code = max(code, st.exitCode)
	}
	if applyErr != nil && code == ExitOK {
		code = ExitInfra
	}
	if stateErr != nil {
		code = max(code, ExitInfra)
		out.Log("", "error", fmt.Sprintf("switchyard %s apply: reading the state: %s", methodName, oneLine(stateErr)))
	}
	if applyErr != nil {
		// Each failed node's error is in OpenTofu's output, naming the node.
		out.Log("", "error", fmt.Sprintf("switchyard %s apply: tofu apply failed: %s", methodName, strings.TrimSpace(oneLine(applyErr))))
	}
	out.Summary(len(nodes), ok, failed, code)
	return code
}

type nodeState struct {
	verdict  verdict.Verdict
	recorded string // the verdict as the state holds it
	exitCode int
}

// states reads each node's recorded verdict from the state.
func (r *tfRun) states(ctx context.Context) (map[string]nodeState, error) {
	raw, err := r.session.ReadState(ctx)
	if err != nil {
		return nil, err
	}
	return readStates(raw, r.m.TenantsOnly)
}

// follows says whether a switchyard_verdict's pass followed the deployment's
// current deploy: its deployment attribute is the digest of that deploy's verdict
// (tofu.LayoutConfig). A deploy that failed, or whose identity or DNS resource failed
// after it, leaves the pass of an earlier deploy in state, which OpenTofu skipped:
// that verdict is not the node's.
func follows(pass, deployment map[string]any) bool {
	v, _ := deployment["verdict"].(string)
	sum := sha256.Sum256([]byte(v))
	return pass["deployment"] == hex.EncodeToString(sum[:])
}

// bootOnly: the resource's recorded verdict is apply --mode boot's, which judged
// nothing: a deployment's whose node runs its old generation until it boots (a pass
// after it judged that generation, not the deployed one), or a pass's that did not
// judge under --mode boot. Either way the pass's verdict is not the node's.
func bootOnly(attrs map[string]any) bool {
	s, _ := attrs["verdict"].(string)
	var v verdict.Verdict
	return json.Unmarshal([]byte(s), &v) == nil && v.Switch.Result == verdict.SwitchBoot
}

// readStates is each node's recorded verdict in a state: its deployment's, or for a
// tenant (tenants) the pass's after registration (SPEC 7.1), when the graph got that
// far, followed the deploy in state (follows) and neither was apply --mode boot's
// (bootOnly).
func readStates(raw []byte, tenants bool) (map[string]nodeState, error) {
	resources, err := tofu.ResourcesOf(raw, tofu.ResourceType, tofu.VerdictType)
	if err != nil {
		return nil, err
	}
	deployments := resources[tofu.ResourceType]
	if tenants {
		for node, attrs := range resources[tofu.VerdictType] {
			if d, ok := deployments[node]; ok && follows(attrs, d) && !bootOnly(d) && !bootOnly(attrs) {
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
	planFile := r.session.File("switchyard.tfplan")
	// Offline: the state as recorded, without reading any resource back: no node,
	// no Incus daemon, no DNS server is asked.
	err := r.session.Plan(ctx, tofu.PlanOptions{Options: r.options(w), Out: planFile, NoRefresh: r.offline})
	wait()
	if lerr := lockRefusal(r.locked.Load(), err); lerr != nil {
		return ExitRefused, lerr
	}
	if err != nil {
		return ExitInfra, fmt.Errorf("tofu plan failed: %s", oneLine(err))
	}
	p, err := r.session.ShowPlan(ctx, planFile)
	if err != nil {
		return ExitInfra, fmt.Errorf("tofu show of the plan: %s", oneLine(err))
	}
	changed := tofu.ChangedNodes(p)
	r.heldBefore(ctx)
	drifted := tofu.Drifted(p)
	for _, n := range r.p.Nodes {
		if d := drifted[n.Name]; d != "" {
			r.out.Log(n.Name, "warn", fmt.Sprintf("%s: drift: %s: apply deploys its toplevel again", n.Name, d))
		}
	}
	saved := newSavedPlan(r.d, r.signer)
	n := 0
	for _, node := range r.p.Nodes {
		c, found := changed[node.Name]
		c = c || !found
		if c {
			n++
		}
		saved.Nodes[node.Name] = savedPlanNode{NixosConf: node.NixosConf, Drv: r.drvs[node.Name], Changed: c}
	}
	would, failed, code := r.dryActivateAll(ctx, saved.Nodes, tofu.NewInstances(p))
	for _, node := range r.p.Nodes {
		r.out.Plan(node.Name, node.NixosConf, saved.Nodes[node.Name].Changed, would[node.Name])
	}
	if err := saved.write(r.req.PlanOut); err != nil {
		return ExitInfra, err
	}
	r.out.PlanSummary(len(r.p.Nodes), n, failed, code)
	return code, nil
}

// dryActivateAll asks every changed node, at most width at once, what a switch to its
// planned toplevel would do, as the ssh method's plan does (fleet.dryActivate: the
// closure is copied, so the apply after it finds it there). Offline, no node is
// asked; nor is one whose Incus instance this plan creates or replaces (fresh): it
// does not exist yet as the apply will make it. A node that cannot be asked fails the
// plan as in the ssh method (exit 3): the plan cannot say what its apply would do.
func (r *tfRun) dryActivateAll(ctx context.Context, planned map[string]savedPlanNode, fresh map[string]bool) (map[string]*effects.DryActivation, int, int) {
	var ask []*plan.Node
	for _, n := range r.p.Nodes {
		switch {
		case r.offline || !planned[n.Name].Changed:
		case fresh[n.Name]:
			r.out.Log(n.Name, "info", fmt.Sprintf("%s: plan: no dry activation: its Incus instance does not exist yet (this plan creates or replaces it)", n.Name))
		default:
			ask = append(ask, n)
		}
	}
	type asked struct {
		would *effects.DryActivation
		code  int
	}
	results := pool.Map(ctx, ask, r.width(), func(ctx context.Context, n *plan.Node) asked {
		d, c := r.dryActivate(ctx, n, r.drvs[n.Name])
		return asked{d, c}
	})
	would := map[string]*effects.DryActivation{}
	failed, code := 0, ExitOK
	for i, n := range ask {
		would[n.Name] = results[i].would
		if results[i].code != ExitOK {
			failed++
			code = max(code, results[i].code)
		}
	}
	return would, failed, code
}

// providerRun is what this run hands the provider (provider/contract): the journal
// directory, the credentials' paths, the receipts' provenance and apply's mode and
// reboot. An Incus remote
// that cannot be used is refused here, before OpenTofu runs.
func (r *tfRun) providerRun() (contract.Run, int, error) {
	var run contract.Run
	if r.p != nil && r.p.StateDir != "" {
		// The provider keeps each node's journal where the ssh method does.
		run.JournalDir = filepath.Join(r.p.StateDir, "journal")
	}
	run.SSHKeyFile = r.s.SSHKeyFile
	if r.req.Verb == "apply" {
		run.Mode, run.Reboot, run.RebootTimeout = applyMode(r.cfg)
	}
	if r.p != nil {
		for _, n := range r.p.Nodes {
			if r.noSubstituteOn(n) {
				run.NoSubstitute = append(run.NoSubstitute, n.Name)
			}
		}
	}
	if r.rec != nil {
		// The provider makes each deployed node's receipt: it gets the run's
		// provenance, and the receipt key's path as it gets the SSH key's.
		prov, err := json.Marshal(r.prov)
		if err != nil {
			return run, ExitInfra, err
		}
		run.ReceiptProvenance, run.ReceiptKey = prov, r.receiptKeyFile
	}
	if r.m.Transport != method.Incus {
		return run, ExitOK, nil
	}
	remote, keyFile := r.s.IncusRemote, r.s.IncusClientKeyFile
	if keyFile != "" {
		if _, err := clientconf.OpenWithKey(remote, keyFile); err != nil {
			return run, ExitRefused, fmt.Errorf("%w: %w", err, ErrRefused)
		}
	} else if _, err := clientconf.Open(remote); err != nil {
		return run, ExitRefused, fmt.Errorf("incusRemote: %w: %w", err, ErrRefused)
	}
	run.IncusRemote, run.IncusClientKeyFile = remote, keyFile
	return run, ExitOK, nil
}

// applyMode is apply's --mode, --reboot and --reboot-timeout as the provider's run
// carries them: the deploy body in the provider reads them as the ssh method's does.
// A switch is the provider's default, so it is left out.
func applyMode(cfg effects.Config) (mode string, reboot bool, timeout contract.Duration) {
	if cfg.Mode != effects.ModeSwitch {
		mode = string(cfg.Mode)
	}
	if cfg.Reboot {
		reboot, timeout = true, contract.Duration(cfg.RebootTimeout)
	}
	return mode, reboot, timeout
}

// heldBefore says which nodes the last apply's rollout held (their state records
// why): the plan deploys them again.
func (r *tfRun) heldBefore(ctx context.Context) {
	var states map[string]nodeState
	if r.before != nil {
		states, _ = readStates(r.before, r.m.TenantsOnly)
	} else {
		states, _ = r.states(ctx)
	}
	for _, n := range r.p.Nodes {
		if st, ok := states[n.Name]; ok && st.verdict.Switch.Result == verdict.SwitchHeld {
			r.out.Log(n.Name, "info", fmt.Sprintf("%s: %s, in the last apply: this plan deploys it", n.Name, strings.Join(st.verdict.Reasons, "; ")))
		}
	}
}

// raw is `run -- <args>`: OpenTofu with the generated configuration; its exit code
// other than 0 is exit 3.
func (r *tfRun) raw(ctx context.Context) (int, error) {
	stdout := r.req.Stdout
	if r.req.JSON {
		// stdout holds JSON Lines only: OpenTofu's output goes to stderr.
		stdout = r.req.Stderr
	}
	err := r.session.Raw(ctx, r.req.TofuArgs, r.req.Stdin, stdout, r.req.Stderr)
	r.logs.closeWait()
	code := ExitOK
	if err != nil {
		code = ExitInfra
	}
	if r.req.JSON && err == nil {
		r.out.Summary(len(r.p.Nodes), 0, 0, code)
	}
	return code, err
}

// ErrStateLocked is a run refused because another run holds the OpenTofu state's
// lock (tofu.ErrStateLocked); the error wraps ErrRefused too (exit 2): nothing was
// changed by this run.
var ErrStateLocked = tofu.ErrStateLocked

// lockRefusal is the refusal of a run whose OpenTofu failed (err) on the state lock,
// as its -json stream said (locked) or err says; nil otherwise.
func lockRefusal(locked bool, err error) error {
	if tofu.LockError(locked, err) == nil && !errors.Is(err, tofu.ErrStateLocked) {
		return nil
	}
	return fmt.Errorf("refused: %w: %w", ErrStateLocked, ErrRefused)
}

// receiptsVerb is receipts show|verify over the receipts the state holds: each
// deployment's last (its receipt attribute); the node keeps them all.
func (r *tfRun) receiptsVerb(ctx context.Context) (int, error) {
	raw, err := r.session.ReadState(ctx)
	if err != nil {
		return ExitInfra, fmt.Errorf("reading the state: %s", oneLine(err))
	}
	recorded, err := tofu.Deployments(raw)
	if err != nil {
		return ExitInfra, err
	}
	list := func(node string) ([]kept, error) {
		env, _ := recorded[node]["receipt"].(string)
		if env == "" {
			return nil, nil
		}
		name, err := receiptName([]byte(env))
		if err != nil {
			return nil, err
		}
		return []kept{{name: name, env: []byte(env)}}, nil
	}
	return r.receipts(ctx, r.req.ReceiptsAction, r.pub, list, r.req.Stdout)
}
