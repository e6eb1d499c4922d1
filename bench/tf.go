package main

// (f): a no-op `switchyard tf apply` on two nodes, against a bare `tofu plan` on the
// same state.
//
// What the ratio includes. A no-op apply (nothing changed since the last apply) is,
// in one switchyard process: reading and merging the operator tree, writing each
// node's plan.json and configuration.nix and hashing its nixos_conf; an eval cache hit
// per node (one `nix-store --check-validity` each; nothing is evaluated or built);
// regenerating the OpenTofu working directory (main.tf.json, the CLI configuration,
// the provider link); reading the local state file before and after (no OpenTofu
// process); then OpenTofu through terraform-exec: `tofu version` (terraform-exec's
// version check) and `tofu apply -json` (refresh, and a plan that finds no change: no
// Create or Update is called, so no deploy body runs, no node is reached over SSH and
// no verdict is judged; the verdicts are re-emitted from the state). `tofu init` runs
// only when the directory was not initialised for the same OpenTofu, switchyard
// binary, backend and CLI configuration: not in the measured rounds. Every OpenTofu
// command but version starts the provider (the switchyard binary) as a plugin.
// The reference is the part of that which OpenTofu cannot avoid: one `tofu plan` in
// the working directory switchyard generated, with its CLI configuration and
// environment, already initialised. The ratio is therefore switchyard's overhead on
// top of OpenTofu's own no-change cost, mostly the extra OpenTofu runs; the rows
// after it count those runs and split one no-op apply's time between them and
// switchyard's own work.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/tofu"
)

// envTofu names the OpenTofu binary switchyard's tf method runs.
const envTofu = "SWITCHYARD_TOFU"

// findTofu gives the OpenTofu binary for (f): $SWITCHYARD_TOFU, else tofu on PATH,
// else the one testbed/setup.sh (SWITCHYARD_TESTBED_TOFU=1) caches.
func findTofu() (string, error) {
	if p := os.Getenv(envTofu); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: %w", envTofu, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("tofu"); err == nil {
		return p, nil
	}
	cached := filepath.Join(testbed.CacheDir(), "tofu-"+testbed.Pin("tofu"), "tofu")
	if _, err := os.Stat(cached); err == nil {
		return cached, nil
	}
	return "", errors.New("OpenTofu not found: set SWITCHYARD_TOFU, put tofu on PATH or run SWITCHYARD_TESTBED_TOFU=1 testbed/setup.sh; -tf=false skips (f)")
}

// tfRows launches two nodes (appended to launched, which the caller deletes), deploys
// them once with `switchyard tf apply`, then times the no-op apply against a bare
// `tofu plan` in alternating rounds.
func tfRows(ctx context.Context, bed *testbed.Bed, tmp, binary, tofuBin string, launched *[]*testbed.Node) ([]row, error) {
	fmt.Fprintln(os.Stderr, "bench: (f) launching two nodes for tf apply")
	var spec plantest.Tree
	for i, label := range []string{"bench-tf1", "bench-tf2"} {
		dir := filepath.Join(tmp, label)
		os.MkdirAll(dir, 0o755)
		nd, err := bed.Launch(ctx, label, dir)
		if nd != nil {
			*launched = append(*launched, nd)
		}
		if err != nil {
			return nil, err
		}
		spec.Nodes = append(spec.Nodes, plantest.Node{Name: "web" + strconv.Itoa(i+1), Host: "127.0.0.1", Port: nd.SSHPort, HostKey: nd.HostKey})
	}
	spec.Closure = "healthy"
	tree, stateDir, cacheDir := filepath.Join(tmp, "tf-tree"), filepath.Join(tmp, "tf-state"), filepath.Join(tmp, "tf-eval-cache")
	if err := plantest.Write(tree, spec); err != nil {
		return nil, err
	}
	deployment := fmt.Sprintf(`{"deployment-method":{"tf":{"sshKeyFile":%q}}}`, bed.KeyFile)
	env := append(os.Environ(), "DEPLOYMENT="+deployment, "DEPLOY_EVAL_CACHE_DIR="+cacheDir, envTofu+"="+tofuBin, credentialDirs())
	apply := func(env []string) (string, error) {
		cmd := exec.Command(binary, "tf", "apply", "--tree", tree, "--state-dir", stateDir, "--output", "json")
		cmd.Env = env
		var stdout strings.Builder
		cmd.Stdout = &stdout
		err := runCmd(cmd)
		return stdout.String(), err
	}

	// The real deploy of both nodes: not measured.
	fmt.Fprintln(os.Stderr, "bench: (f) first tf apply (the real deploy)")
	out, err := apply(env)
	if err != nil {
		return nil, fmt.Errorf("first tf apply: %w", err)
	}
	if err := tfCheck(out, spec, false); err != nil {
		return nil, fmt.Errorf("first tf apply: %w", err)
	}

	// The bare plan runs where switchyard ran OpenTofu, with the environment it gives
	// OpenTofu (tofu.Env: CLI configuration, the ssh key for the provider, BOOTSTRAP*
	// dropped; plus terraform-exec's TF_IN_AUTOMATION). -detailed-exitcode makes a
	// plan that finds a change exit 2, so a plan that is not a no-op is an error.
	ws := &tofu.Workspace{Dir: filepath.Join(stateDir, "tofu"), Bin: tofuBin}
	ws.CLIConfig = filepath.Join(ws.Dir, "cli.tfrc")
	run, err := contract.Run{SSHKeyFile: bed.KeyFile}.Encode()
	if err != nil {
		return nil, err
	}
	ws.Env = tofu.Env(os.Environ(), ws.CLIConfig, map[string]string{contract.Env: run, "TF_IN_AUTOMATION": "1"})
	barePlan := func() error {
		return runCmd(ws.Command("plan", "-input=false", "-lock=true", "-no-color", "-detailed-exitcode"))
	}

	var applyTimes, planTimes []time.Duration
	for round := 0; round < *runs; round++ {
		sides := []func() error{
			func() error {
				var out string
				d, err := timed(func() (err error) { out, err = apply(env); return err })
				applyTimes = append(applyTimes, d)
				if err != nil {
					return fmt.Errorf("no-op tf apply: %w", err)
				}
				return tfCheck(out, spec, true)
			},
			func() error {
				d, err := timed(barePlan)
				planTimes = append(planTimes, d)
				if err != nil {
					return fmt.Errorf("bare tofu plan (exit 2: it found a change): %w", err)
				}
				return nil
			},
		}
		if round%2 == 1 {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return nil, fmt.Errorf("tf round %d: %w", round+1, err)
			}
		}
	}
	applyTime, planTime := median(applyTimes), median(planTimes)
	rows := []row{{"(f) no-op tf apply on 2 nodes vs bare tofu plan", dur(applyTime), dur(planTime), ratio(applyTime, planTime)}}

	// Once more, unmeasured, through a wrapper that logs each OpenTofu command and
	// its time: how many OpenTofu runs the no-op apply makes (against the bare plan's
	// one) and where its time goes. The wrapper's own cost (a shell, two date runs per
	// command) is in this run only.
	wrapper, log := filepath.Join(tmp, "tofu-logged"), filepath.Join(tmp, "tofu-logged.log")
	script := "#!/bin/sh\nstart=$(date +%s%N)\n" + testbed.ShellQuote(tofuBin) + " \"$@\"\nrc=$?\n" +
		"echo \"$1 $(($(date +%s%N) - start))\" >>" + testbed.ShellQuote(log) + "\nexit $rc\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		return nil, err
	}
	// The wrapper is another OpenTofu binary to the working directory's init mark, so
	// its first apply runs init again: that one is not counted.
	if _, err = apply(append(env, envTofu+"="+wrapper)); err != nil {
		return nil, fmt.Errorf("logged no-op tf apply: %w", err)
	}
	if err := os.Remove(log); err != nil {
		return nil, err
	}
	var whole time.Duration
	if whole, err = timed(func() (err error) { out, err = apply(append(env, envTofu+"="+wrapper)); return err }); err != nil {
		return nil, fmt.Errorf("logged no-op tf apply: %w", err)
	}
	if err := tfCheck(out, spec, true); err != nil {
		return nil, fmt.Errorf("logged no-op tf apply: %w", err)
	}
	logged, err := os.ReadFile(log)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
	var cmds []string // in order of first run; a command run twice is summed
	byCmd := map[string]time.Duration{}
	var inTofu time.Duration
	for _, line := range lines {
		name, ns, _ := strings.Cut(line, " ")
		d, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("wrapper log %q: %w", line, err)
		}
		if _, seen := byCmd[name]; !seen {
			cmds = append(cmds, name)
		}
		byCmd[name] += time.Duration(d)
		inTofu += time.Duration(d)
	}
	rows = append(rows, row{"(f) tofu runs in one no-op tf apply vs the bare plan's", strconv.Itoa(len(lines)), "1", float64(len(lines))})
	for _, name := range cmds {
		rows = append(rows, row{"(f) tofu " + name + " within a no-op tf apply vs the whole apply", dur(byCmd[name]), dur(whole), ratio(byCmd[name], whole)})
	}
	rows = append(rows, row{"(f) switchyard outside tofu within a no-op tf apply vs the whole apply", dur(whole - inTofu), dur(whole), ratio(whole-inTofu, whole)})
	return rows, nil
}

// tfCheck reads `switchyard tf apply --output json`: every node has a passing
// verdict; with noop, OpenTofu created, changed or destroyed nothing.
func tfCheck(jsonLines string, spec plantest.Tree, noop bool) error {
	ok := map[string]bool{}
	var changes []string
	for _, line := range strings.Split(jsonLines, "\n") {
		var e struct {
			Kind string `json:"kind"`
			Node string `json:"node"`
			OK   bool   `json:"ok"`
			Msg  string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &e) != nil {
			continue
		}
		switch e.Kind {
		case "verdict":
			ok[e.Node] = e.OK
		case "log":
			for _, w := range []string{"Creating...", "Modifying...", "Destroying..."} {
				if strings.Contains(e.Msg, w) {
					changes = append(changes, e.Msg)
				}
			}
		}
	}
	for _, n := range spec.Nodes {
		if !ok[n.Name] {
			return fmt.Errorf("%s: no passing verdict", n.Name)
		}
	}
	if noop && len(changes) > 0 {
		return fmt.Errorf("not a no-op: %s", strings.Join(changes, "; "))
	}
	return nil
}
