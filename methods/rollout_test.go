package methods

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/effects/effectstest"
	"github.com/switchyard-nix/switchyard/rollout"
	"github.com/switchyard-nix/switchyard/verdict"
)

// Staged rollouts in the ssh runner (issue 14 item 2): the stages' order, the stop at
// the first failed verdict, and the nodes held untouched.

// playBody stands for the deploy body on an effectstest.Node: a node already running
// its toplevel is unchanged; any other gets the copy and the switch, and passes
// exactly when its SwitchExit is 0.
func playBody(ctx context.Context, d *effects.Deploy) effects.Result {
	n := d.Transport.(*effectstest.Node)
	drv, _, _ := d.Source.Evaluate(ctx)
	top := strings.TrimSuffix(drv, ".drv") + "-system"
	var current strings.Builder
	n.Run(ctx, effects.Command{Argv: []string{"readlink", "-f", "/run/current-system"}, Stdout: &current})
	v := verdict.Verdict{Node: d.Node, Pass: verdict.PassDeploy, Reachable: true, Toplevel: top, OK: true}
	if strings.TrimSpace(current.String()) == top {
		v.Switch.Result = verdict.SwitchUnchanged
	} else {
		n.CopyClosure(ctx, []string{top})
		n.Run(ctx, effects.Command{Argv: []string{"systemd-run", "--unit=switch", top + "/bin/switch-to-configuration", "switch"}})
		v.Switch = verdict.Switch{Result: verdict.SwitchOK, ExitCode: n.SwitchExit}
		if n.SwitchExit != 0 {
			v.Switch.Result, v.OK, v.ExitCode = verdict.SwitchUnitsFailed, false, ExitVerdict
		}
	}
	d.Reporter.Verdict(v)
	return effects.Result{Verdict: v, ExitCode: v.ExitCode}
}

// fakeNodes are effectstest nodes running an old generation, whose switch
// activates /nix/store/<name>-system (sshFleet's toplevel for the node).
func fakeNodes(names ...string) map[string]*effectstest.Node {
	nodes := map[string]*effectstest.Node{}
	for _, name := range names {
		nodes[name] = &effectstest.Node{Current: "/nix/store/old-system", Toplevel: "/nix/store/" + name + "-system", Activates: true}
	}
	return nodes
}

// stagesRun is the nodes deployed, stage by stage as want ("web1|web2 web3") groups
// them: the verdicts come in the order the nodes finished, a stage's nodes in any
// order among themselves but never mixed with another stage's.
func stagesRun(rep *effectstest.Events, want string) string {
	var ran []string
	for _, v := range rep.Verdicts() {
		if v.Switch.Result != verdict.SwitchHeld {
			ran = append(ran, v.Node)
		}
	}
	var out []string
	for _, st := range strings.Split(want, "|") {
		n := min(len(strings.Fields(st)), len(ran))
		got := slices.Clone(ran[:n])
		slices.Sort(got)
		out = append(out, strings.Join(got, " "))
		ran = ran[n:]
	}
	if len(ran) > 0 {
		out = append(out, strings.Join(ran, " "))
	}
	return strings.Join(out, "|")
}

func touched(n *effectstest.Node) bool {
	return n.Did("copy ") > 0 || n.Did("run systemd-run") > 0
}

func TestSSHRollout(t *testing.T) {
	six := []string{"web1", "web2", "web3", "web4", "web5", "web6"}
	for _, tc := range []struct {
		name      string
		spec      string
		failing   []string // SwitchExit 4
		unchanged []string // already on their toplevel
		stages    string   // the nodes deployed, stage by stage (sorted within a stage)
		held      []string
		code      int
		summary   []int
		reason    string
	}{
		{name: "no rollout: every node", stages: "web1 web2 web3 web4 web5 web6", summary: []int{6, 6, 0, 0}},
		{name: "every stage passes", spec: "canary=1,batch=2", stages: "web1|web2 web3|web4 web5|web6", summary: []int{6, 6, 0, 0}},
		{name: "the canary fails: the five others held, untouched", spec: "canary=1,batch=2", failing: []string{"web1"},
			stages: "web1", held: []string{"web2", "web3", "web4", "web5", "web6"}, code: ExitVerdict,
			summary: []int{6, 0, 6, 1}, reason: "held: the rollout stopped at the canary (web1 failed)"},
		{name: "batch 2 fails: batch 3 held", spec: "canary=1,batch=2", failing: []string{"web4"},
			stages: "web1|web2 web3|web4 web5", held: []string{"web6"}, code: ExitVerdict,
			summary: []int{6, 4, 2, 1}, reason: "held: the rollout stopped at batch 2 (web4 failed)"},
		{name: "unchanged nodes go first and don't count", spec: "canary=1,batch=2", failing: []string{"web4"},
			unchanged: []string{"web1", "web2"}, stages: "web1 web2 web3|web4 web5", held: []string{"web6"},
			code: ExitVerdict, summary: []int{6, 4, 2, 1}, reason: "held: the rollout stopped at batch 1 (web4 failed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := fakeNodes(six...)
			for _, name := range six {
				if slices.Contains(tc.failing, name) {
					nodes[name].SwitchExit = 4
				}
				if slices.Contains(tc.unchanged, name) {
					nodes[name].Current = "/nix/store/" + name + "-system"
				}
			}
			f, rep, dialed := sshFleet(t, nodes, six...)
			f.body = playBody
			if err := f.setRollout(tc.spec); err != nil {
				t.Fatal(err)
			}
			code := f.deploy(context.Background(), false)
			if code != tc.code || !slices.Equal(rep.Summarized(), tc.summary) {
				t.Errorf("exit %d, summary %v; want %d, %v", code, rep.Summarized(), tc.code, tc.summary)
			}
			if got := stagesRun(rep, tc.stages); got != tc.stages {
				t.Errorf("deployed %q, want %q", got, tc.stages)
			}
			var held []string
			for _, v := range rep.Verdicts() {
				if v.Switch.Result != verdict.SwitchHeld {
					continue
				}
				held = append(held, v.Node)
				if v.OK || v.ExitCode != ExitVerdict || !slices.Equal(v.Reasons, []string{tc.reason}) || v.Toplevel != "/nix/store/"+v.Node+"-system" {
					t.Errorf("held verdict %+v", v)
				}
				if ok, code, _ := verdict.Decide(v); ok || code != ExitVerdict {
					t.Errorf("%s: Decide gives ok=%v exit %d for a held node", v.Node, ok, code)
				}
			}
			if !slices.Equal(held, tc.held) || len(rep.Verdicts()) != len(six) {
				t.Errorf("held %v, want %v (%d verdicts)", held, tc.held, len(rep.Verdicts()))
			}
			for _, name := range tc.held {
				if touched(nodes[name]) {
					t.Errorf("held node %s was touched: %q", name, nodes[name].Log())
				}
			}
			// One dial per node for the probe (with a rollout), one per node deployed.
			want := len(six) - len(tc.held)
			if tc.spec != "" {
				want += len(six)
			}
			if *dialed != want {
				t.Errorf("dialed %d times, want %d", *dialed, want)
			}
		})
	}
}

// A rerun after the fix continues: the nodes already deployed are unchanged and
// don't count, so the canary is the first node not yet on its generation.
func TestSSHRolloutRerun(t *testing.T) {
	six := []string{"web1", "web2", "web3", "web4", "web5", "web6"}
	nodes := fakeNodes(six...)
	nodes["web4"].SwitchExit = 4
	f, rep, _ := sshFleet(t, nodes, six...)
	f.body = playBody
	if err := f.setRollout("canary=1,batch=2"); err != nil {
		t.Fatal(err)
	}
	if code := f.deploy(context.Background(), false); code != ExitVerdict {
		t.Fatalf("first run: exit %d", code)
	}
	// Fixed: a new toplevel in real life; here web4's is back to the old one and passes.
	nodes["web4"].SwitchExit, nodes["web4"].Current = 0, "/nix/store/old-system"
	*rep = effectstest.Events{}
	if code := f.deploy(context.Background(), false); code != ExitOK || !slices.Equal(rep.Summarized(), []int{6, 6, 0, 0}) {
		t.Fatalf("rerun: exit %d, summary %v", code, rep.Summarized())
	}
	// Unchanged web1-web3 and web5 go with the canary web4; web6 is batch 1.
	if got := stagesRun(rep, "web1 web2 web3 web4 web5|web6"); got != "web1 web2 web3 web4 web5|web6" || !touched(nodes["web6"]) || nodes["web1"].Did("copy ") != 1 {
		t.Errorf("rerun deployed %q; web6 log %q, web1 log %q", got, nodes["web6"].Log(), nodes["web1"].Log())
	}
	logs := strings.Join(rep.Logs(), "\n")
	if !strings.Contains(logs, "rollout: canary of 2: web1, web2, web3, web4, web5") || !strings.Contains(logs, "rollout: batch 1 of 2: web6") {
		t.Errorf("logs:\n%s", logs)
	}
}

func TestSetRollout(t *testing.T) {
	d, p := testPlan("ssh", map[string]any{"rollout": "canary=2,batch=50%"}, "web1")
	f := &fleet{m: d.Method, d: d, s: d.Typed(), p: p}
	if err := f.setRollout(""); err != nil || f.rollout.String() != "canary=2,batch=50%" {
		t.Errorf("the setting: %v, %v", f.rollout, err)
	}
	if err := f.setRollout("canary=1"); err != nil || f.rollout.String() != "canary=1" {
		t.Errorf("the flag over the setting: %v, %v", f.rollout, err)
	}
	for _, tc := range []struct{ flag, setting, names string }{
		{"canary=1,wave=2", "", "--rollout: "},
		{"", "batch=0", "the rollout setting: "},
		{"batch=150%", "canary=1", "--rollout: "},
	} {
		d, p := testPlan("ssh", map[string]any{"rollout": tc.setting}, "web1")
		f := &fleet{m: d.Method, d: d, s: d.Typed(), p: p}
		err := f.setRollout(tc.flag)
		if !errors.Is(err, ErrRefused) || exitFor(err) != ExitRefused || !strings.HasPrefix(err.Error(), tc.names) || strings.Contains(err.Error(), "\n") {
			t.Errorf("flag %q, setting %q: %v, want a one-line refusal naming %q", tc.flag, tc.setting, err, tc.names)
		}
	}
	if (rollout.Spec{}).Enabled() {
		t.Error("the zero spec stages the fleet")
	}
}

// A held node's text block says held and why, without claiming anything was read.
func TestHeldVerdictText(t *testing.T) {
	v := probed{sp: savedPlanNode{Toplevel: "/nix/store/t-system"}, seen: seen{target: "ssh root@127.0.0.1:2201", current: "/nix/store/old"}}.
		held("web6", "held: the rollout stopped at batch 2 (web4 failed)")
	var b bytes.Buffer
	if err := v.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, want := range []string{"switch:", "held\n", "FAILED: held: the rollout stopped at batch 2 (web4 failed)", "<not read>"} {
		if !strings.Contains(text, want) {
			t.Errorf("text block lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "systemd state not read") || strings.Contains(text, "unreachable") {
		t.Errorf("text block names a failure the held node does not have:\n%s", text)
	}
}

// Issue 31 item 3: a rollout refuses (exit 2, naming them) instances its plan changes
// outside the first stage; in the first stage, or with no rollout, they are fine.
func TestInstancesOutsideCanary(t *testing.T) {
	spec, err := rollout.Parse("canary=1")
	if err != nil {
		t.Fatal(err)
	}
	stages := rollout.Stages([]string{"web1", "web2", "web3"}, map[string]bool{"web1": true, "web2": true, "web3": true}, spec)
	for _, c := range []struct {
		instances map[string]bool
		want      string
	}{
		{nil, ""},
		{map[string]bool{"web1": true}, ""},
		{map[string]bool{"web1": true, "web3": true}, "the Incus instances of web3, outside"},
		{map[string]bool{"web2": true, "web3": true}, "the Incus instances of web2, web3, outside"},
	} {
		err := instancesOutsideCanary(stages, c.instances)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.instances, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrRefused)):
			t.Errorf("%v: %v, want %q (refused)", c.instances, err, c.want)
		}
	}
	if err := instancesOutsideCanary(nil, map[string]bool{"web1": true}); err != nil {
		t.Errorf("no stages: %v", err)
	}
}
