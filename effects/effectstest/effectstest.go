package effectstest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/verdict"
)

// Node is an effects.Transport answering from systemd state recorded on test-bed
// nodes (verdict/testdata): each read of the node returns the next recorded
// sample. Everything else it is asked is logged, so tests can check what the
// body did. Set its fields before the body runs; it is safe for concurrent use
// while it runs.
type Node struct {
	Samples     [][]byte // the recorded samples, in order
	Next        int      // the sample the next read returns (the last one once past the end)
	Toplevel    string   // the recording's toplevel
	Owned       []string // the configuration's units
	Wanted      []string // the units multi-user.target wants
	SwitchExit  int      // switch-to-configuration's exit status
	Activates   bool     // the switch repoints /run/current-system at Toplevel
	Current     string   // what /run/current-system points at
	Unreachable bool     // every Run fails with effects.ErrUnreachable
	BootInit    string   // what the default boot entry starts (effects.BootEntryScript's answer)
	// BootID is the kernel's boot id; `systemctl reboot` draws a new one and boots
	// RebootInto ("" is Toplevel): /run/booted-system and /run/current-system then
	// lead there.
	BootID, RebootInto string
	// DryActivate is what switch-to-configuration dry-activate prints on stderr.
	DryActivate string
	// Lock is the node's deploy lock line (effects.LockScript's /run/switchyard/lock,
	// "" for none) and LockGeneration its fence counter: the fake plays the lock's
	// verbs and its fence like the script does on a node.
	Lock           string
	LockGeneration uint64

	mu  sync.Mutex
	log []string
}

var _ effects.Transport = (*Node)(nil)

// Load is a Node playing the recording of scenario (a directory of
// verdict/testdata): running its toplevel's predecessor, a switch that activates.
func Load(t testing.TB, scenario string) *Node {
	t.Helper()
	n, err := LoadRecording(scenario)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// LoadRecording is Load outside a test (the bench's simulated fleet).
func LoadRecording(scenario string) (*Node, error) {
	td, err := testdata()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(td, scenario)
	raw, err := os.ReadFile(filepath.Join(dir, "recording.json"))
	if err != nil {
		return nil, err
	}
	var rec struct {
		Toplevel   string   `json:"toplevel"`
		SwitchExit int      `json:"switch_exit"`
		Owned      []string `json:"owned"`
		Wanted     []string `json:"wanted"`
		Samples    []struct {
			File string `json:"file"`
		} `json:"samples"`
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "recording.json"), err)
	}
	n := &Node{Toplevel: rec.Toplevel, Owned: rec.Owned, Wanted: rec.Wanted, SwitchExit: rec.SwitchExit,
		Activates: true, Current: "/nix/store/00000000000000000000000000000000-nixos-system-previous",
		BootInit: rec.Toplevel + "/init"}
	for _, s := range rec.Samples {
		b, err := os.ReadFile(filepath.Join(dir, s.File))
		if err != nil {
			return nil, err
		}
		n.Samples = append(n.Samples, b)
	}
	return n, nil
}

// testdata is verdict/testdata, found from this file's place in the module so
// that any package's tests can load a recording.
func testdata() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("effectstest: cannot locate verdict/testdata")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "verdict", "testdata"), nil
}

// Record adds s to the node's log.
func (n *Node) Record(s string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.log = append(n.log, s)
}

// Did counts the log entries starting with prefix ("run systemd-run", "copy ",
// "finalize ", "revert").
func (n *Node) Did(prefix string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, l := range n.log {
		if strings.HasPrefix(l, prefix) {
			c++
		}
	}
	return c
}

// Log is what the node was asked, in order.
func (n *Node) Log() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.log...)
}

func (n *Node) Target() string { return "fake node" }
func (n *Node) Close() error   { return nil }

func (n *Node) Run(ctx context.Context, c effects.Command) (int, error) {
	if n.Unreachable {
		return 0, fmt.Errorf("dial: connection refused: %w", effects.ErrUnreachable)
	}
	c.Argv = effects.FenceArgv(ctx, c.Argv)
	if verb, args, ok := lockVerb(c.Argv); ok {
		return n.lock(c, verb, args)
	}
	return n.run(c)
}

// lockVerb splits a command of effects.LockScript (sh -c SCRIPT sh VERB ARGS...).
func lockVerb(argv []string) (verb string, args []string, ok bool) {
	if len(argv) < 5 || argv[0] != "sh" || argv[2] != effects.LockScript {
		return "", nil, false
	}
	return argv[4], argv[5:], true
}

// lock plays effects.LockScript's verb with args.
func (n *Node) lock(c effects.Command, verb string, args []string) (int, error) {
	out, errOut := c.Stdout, c.Stderr
	if out == nil {
		out = io.Discard
	}
	if errOut == nil {
		errOut = io.Discard
	}
	n.mu.Lock()
	now := time.Now().Unix()
	cur := n.Lock
	f := strings.Fields(cur)
	mine := func(token string) bool { return len(f) >= 5 && f[0] == token }
	taken := "" // what acquire prints before the lock it took
	if verb == "acquire" {
		// LockScript's acquire: a take when there is no lock (the fake runs no
		// switch units), else a read. The log names what it did.
		if cur == "" {
			verb, args, taken = "take", append([]string{""}, args...), "taken "
			n.log = append(n.log, "lock take (acquire)")
		} else {
			verb = "read"
			n.log = append(n.log, "lock read (acquire)")
		}
	} else if verb != "fence" {
		n.log = append(n.log, "lock "+verb)
	}
	switch verb {
	case "read":
		n.mu.Unlock()
		fmt.Fprintf(out, "now %d\ngeneration %d\nlock %s\n", now, n.LockGeneration, cur)
		return 0, nil
	case "take":
		if cur != args[0] {
			n.mu.Unlock()
			fmt.Fprintln(out, cur)
			return effects.LockFenced, nil
		}
		ttl, _ := strconv.ParseInt(args[3], 10, 64)
		n.LockGeneration++
		n.Lock = fmt.Sprintf("%d %d %s %s %d %s", n.LockGeneration, now+ttl, args[1], args[2], now, args[4])
	case "renew":
		if !mine(args[0]) {
			n.mu.Unlock()
			fmt.Fprintln(out, cur)
			return effects.LockFenced, nil
		}
		n.lease(f, now, args[1])
	case "release":
		if !mine(args[0]) {
			n.mu.Unlock()
			fmt.Fprintln(out, cur)
			return effects.LockFenced, nil
		}
		n.Lock = ""
	case "fence": // TOKEN TTL ARGV...
		passed := n.passFence(args[0], args[1], now)
		n.mu.Unlock()
		if !passed {
			n.Record("fenced " + strings.Join(args[2:], " "))
			fmt.Fprintf(errOut, "%s the deploy lock with token %s is no longer this deployer's (lock now: %s); %s not run\n",
				effects.LockLostMarker, args[0], cur, args[2])
			return effects.LockFenced, nil
		}
		c.Argv = args[2:]
		return n.run(c)
	default:
		n.mu.Unlock()
		return 70, nil
	}
	lock := n.Lock
	n.mu.Unlock()
	fmt.Fprintln(out, taken+lock)
	return 0, nil
}

// passFence plays the fence verb: whether token is the unexpired lock, whose lease
// it then renews to ttl seconds ("0": left as it is). n.mu is held.
func (n *Node) passFence(token, ttl string, now int64) bool {
	f := strings.Fields(n.Lock)
	if len(f) < 5 || f[0] != token {
		return false
	}
	if exp, _ := strconv.ParseInt(f[1], 10, 64); now >= exp {
		return false
	}
	if ttl != "0" {
		n.lease(f, now, ttl)
		n.log = append(n.log, "lock lease "+ttl+" (fence)")
	}
	return true
}

// lease rewrites the lock line f with a lease of ttl seconds from now. n.mu is held.
func (n *Node) lease(f []string, now int64, ttl string) {
	t, _ := strconv.ParseInt(ttl, 10, 64)
	n.Lock = fmt.Sprintf("%s %d %s", f[0], now+t, strings.Join(f[2:], " "))
}

// fenceOK is whether a fenced ctx passes the fake's fence (a step the fake plays
// without commands, as the bootloader hooks).
func (n *Node) fenceOK(ctx context.Context) bool {
	verb, args, ok := lockVerb(effects.FenceArgv(ctx, []string{"true"}))
	if !ok {
		return true
	}
	if verb != "fence" || len(args) < 3 {
		panic(fmt.Sprintf("effectstest: FenceArgv gave the lock verb %q %q, not fence TOKEN TTL ARGV", verb, args))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.passFence(args[0], args[1], time.Now().Unix())
}

func (n *Node) run(c effects.Command) (int, error) {
	out := c.Stdout
	if out == nil {
		out = io.Discard
	}
	argv := strings.Join(c.Argv, " ")
	n.Record("run " + argv)
	if path, inner, ok := Optional(c.Argv); ok {
		// The path exists unless it is the chain file, which no scenario declares.
		if path == "/run/current-system/etc/switchyard/chain" {
			return 0, nil
		}
		argv = strings.Join(inner, " ")
		n.Record("run " + argv)
	}
	switch {
	case argv == "systemctl is-system-running":
		fmt.Fprintln(out, "running")
	case len(c.Argv) == 2 && strings.HasSuffix(c.Argv[0], "/bin/switch-to-configuration") && c.Argv[1] == "dry-activate":
		if c.Stderr != nil {
			fmt.Fprint(c.Stderr, n.DryActivate)
		}
	case len(c.Argv) >= 3 && c.Argv[0] == "sh" && c.Argv[2] == verdict.ReadScript:
		n.mu.Lock()
		s := n.Samples[min(n.Next, len(n.Samples)-1)]
		n.Next++
		n.mu.Unlock()
		out.Write(s)
	case len(c.Argv) == 3 && c.Argv[0] == "sh" && c.Argv[2] == effects.BootEntryScript:
		fmt.Fprintln(out, n.BootInit)
	case strings.HasPrefix(argv, "systemd-run "):
		if n.Activates {
			n.mu.Lock()
			n.Current = n.Toplevel
			n.mu.Unlock()
		}
	case strings.HasPrefix(argv, "systemctl show --property=LoadState,ActiveState,Result,ExecMainCode,ExecMainStatus"):
		fmt.Fprint(out, n.switchProps())
	case len(c.Argv) == 7 && c.Argv[0] == "sh" && c.Argv[2] == effects.SwitchWaitScript:
		// The switch has ended by the time it is read: the script prints its
		// result and /run/current-system.
		fmt.Fprintf(out, "%scurrent=%s\n", n.switchProps(), n.current())
	case argv == "readlink -f /run/current-system":
		fmt.Fprintln(out, n.current())
	case argv == "cat /proc/sys/kernel/random/boot_id":
		n.mu.Lock()
		fmt.Fprintln(out, n.BootID)
		n.mu.Unlock()
	case argv == "systemctl reboot":
		n.mu.Lock()
		n.BootID += "-next"
		n.Current = n.Toplevel
		if n.RebootInto != "" {
			n.Current = n.RebootInto
		}
		n.mu.Unlock()
	case argv == "readlink -e /run/booted-system":
		fmt.Fprintln(out, n.current())
	case len(c.Argv) == 5 && c.Argv[0] == "sh" && c.Argv[2] == effects.OwnedScript:
		// The units and wants; no etc/fstab.
		fmt.Fprintln(out, "##switchyard-owned units")
		for _, u := range n.Owned {
			fmt.Fprintf(out, "f %s\n", u)
		}
		fmt.Fprintln(out, "d multi-user.target.wants")
		for _, u := range n.Wanted {
			fmt.Fprintf(out, "f multi-user.target.wants/%s\n", u)
		}
		fmt.Fprint(out, "##switchyard-owned fstab\n\n##switchyard-owned end\n")
	case strings.HasPrefix(argv, "cat -- /run/current-system/etc/switchyard/chain"):
		return 1, nil
	case strings.HasPrefix(argv, "test -e /run/current-system/etc/switchyard/chain "):
		return 1, nil // no chain declared
	}
	return 0, nil
}

// current is where the node's /run/current-system leads.
func (n *Node) current() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.Current
}

// switchProps is how systemctl shows the switch unit once the switch has exited
// with SwitchExit.
func (n *Node) switchProps() string {
	state := "active"
	if n.SwitchExit != 0 {
		state = "failed"
	}
	return fmt.Sprintf("LoadState=loaded\nActiveState=%s\nResult=success\nExecMainCode=1\nExecMainStatus=%d\n", state, n.SwitchExit)
}

func (n *Node) CopyClosure(ctx context.Context, paths []string) error {
	n.Record("copy " + strings.Join(paths, " "))
	return nil
}

func (n *Node) Fresh(ctx context.Context) error {
	n.Record("fresh")
	return nil
}

func (n *Node) SwitchRuntimeMaxArgs() []string { return []string{"--property=RuntimeMaxSec=60"} }

func (n *Node) FinalizeBootloader(ctx context.Context, top string) error {
	if !n.fenceOK(ctx) {
		n.Record("fenced finalize " + top)
		return fmt.Errorf("set the system profile: nix-env exited %d: %s", effects.LockFenced, effects.LockLostMarker)
	}
	n.Record("finalize " + top)
	return nil
}

func (n *Node) RevertBootloader(ctx context.Context) error {
	if !n.fenceOK(ctx) {
		n.Record("fenced revert")
		return fmt.Errorf("revert bootloader: exited %d: %s", effects.LockFenced, effects.LockLostMarker)
	}
	n.Record("revert")
	return nil
}

// Events is a Reporter that records what a run reports: "<phase>:<state>" for each
// phase event and "VERDICT" for each verdict, in order, and the logs, verdicts, plan
// findings and summary of the methods' runners (methods.Reporter).
type Events struct {
	mu       sync.Mutex
	list     []string
	verdict  verdict.Verdict
	logs     []string
	verdicts []verdict.Verdict
	plans    map[string]bool // node to changed
	summary  []int           // nodes, ok, failed, exit code
}

var _ effects.Reporter = (*Events)(nil)

func (e *Events) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, phase+":"+string(state))
}

func (e *Events) Log(node, level, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logs = append(e.logs, level+" "+msg)
}

func (e *Events) Verdict(v verdict.Verdict) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, "VERDICT")
	e.verdict = v
	e.verdicts = append(e.verdicts, v)
}

func (e *Events) Plan(node, nixosConf string, changed bool, would *effects.DryActivation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.plans == nil {
		e.plans = map[string]bool{}
	}
	e.plans[node] = changed
}

// Status is kept as a log line of the node's disagreements.
func (e *Events) Status(s verdict.NodeStatus) {
	e.Log(s.Node, "status", strings.Join(s.Disagreements, "; "))
}

// Exec is kept as a log line of the node's exit code.
func (e *Events) Exec(node string, exitCode int, stdout, stderr string) {
	e.Log(node, "exec", fmt.Sprintf("exit %d", exitCode))
}

// PlanSummary is kept as Summary's nodes, changed, failed and exit code.
func (e *Events) PlanSummary(nodes, changed, failed, exitCode int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.summary = []int{nodes, changed, failed, exitCode}
}

func (e *Events) Summary(nodes, ok, failed, exitCode int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.summary = []int{nodes, ok, failed, exitCode}
}

// Logs is every log line, "<level> <msg>", in order.
func (e *Events) Logs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.logs...)
}

// Verdicts is every verdict reported, in order.
func (e *Events) Verdicts() []verdict.Verdict {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]verdict.Verdict(nil), e.verdicts...)
}

// Plans is the plan verb's findings: node to whether it would be deployed.
func (e *Events) Plans() map[string]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.plans)
}

// Summarized is the closing summary: nodes, ok, failed, exit code (nil before).
func (e *Events) Summarized() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.summary)
}

// List is every event recorded, in order.
func (e *Events) List() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.list...)
}

// Reported is the verdict the body reported (the zero Verdict before).
func (e *Events) Reported() verdict.Verdict {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.verdict
}

// Started lists the phases that started, in order.
func (e *Events) Started() []string {
	var out []string
	for _, s := range e.List() {
		if p, ok := strings.CutSuffix(s, ":start"); ok {
			out = append(out, p)
		}
	}
	return out
}

// Optional takes apart a command run through effects.OptionalArgv: the path it asks
// for and the command it runs when that path exists.
func Optional(argv []string) (path string, inner []string, ok bool) {
	if len(argv) < 6 || argv[0] != "sh" || argv[1] != "-c" || argv[2] != effects.OptionalScript {
		return "", nil, false
	}
	return argv[4], argv[5:], true
}
