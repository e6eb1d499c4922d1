package shell_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/shell"
	"github.com/switchyard-nix/switchyard/verdict"
)

// sshHooks is a transport over testdata/ssh-hooks.sh reaching 127.0.0.1:port.
func sshHooks(t *testing.T, port int, key, knownHosts string) *shell.Transport {
	t.Helper()
	tr, err := shell.New(shell.Config{
		Hooks: "testdata/ssh-hooks.sh",
		Env:   []string{"SY_PORT=" + strconv.Itoa(port), "SY_KEY=" + key, "SY_KNOWN_HOSTS=" + knownHosts},
	})
	if err != nil {
		t.Fatalf("shell.New: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func nodeHooks(t *testing.T, node *testbed.Node) *shell.Transport {
	return sshHooks(t, node.SSHPort, node.KeyFile, node.KnownHosts)
}

func run(t *testing.T, tr effects.Transport, cmd effects.Command) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	code, err := tr.Run(ctx, cmd)
	if err != nil {
		t.Fatalf("Run %q: %v", cmd.Argv, err)
	}
	return code, stdout.String()
}

// TestNode drives one test-bed node through the ssh hooks: every hook of SPEC 5.
func TestNode(t *testing.T) {
	bed := testbed.Require(t)
	node := bed.Node(t)
	tr := nodeHooks(t, node)

	t.Run("target", func(t *testing.T) {
		if got, want := tr.Target(), "shell root@127.0.0.1:"+strconv.Itoa(node.SSHPort); got != want {
			t.Fatalf("Target = %q, want %q", got, want)
		}
	})

	t.Run("argv verbatim", func(t *testing.T) {
		args := []string{"plain", "with space", "it's", `"double"`, "$HOME", "${PATH}", "$(touch /tmp/pwned)",
			"`touch /tmp/pwned`", "*", "[a]", `back\slash`, "new\nline", "tab\there", "", "-n", "a=b", "ü ☃",
			"; touch /tmp/pwned", "&& touch /tmp/pwned", "#x", "~", "!x"}
		code, out := run(t, tr, effects.Command{Argv: append([]string{"printf", `%s\0`}, args...)})
		if code != 0 {
			t.Fatalf("printf exited %d", code)
		}
		got := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
		if diff := cmp.Diff(args, got); diff != "" {
			t.Fatalf("arguments changed on the way (-want +got):\n%s", diff)
		}
		if code, _ := run(t, tr, effects.Command{Argv: []string{"test", "-e", "/tmp/pwned"}}); code == 0 {
			t.Fatal("an argument was run as a command on the node")
		}
	})

	t.Run("exit status", func(t *testing.T) {
		for _, want := range []int{0, 1, 3, 100, 254} {
			if code, _ := run(t, tr, effects.Command{Argv: []string{"sh", "-c", "exit " + strconv.Itoa(want)}}); code != want {
				t.Errorf("exit %d came back as %d", want, code)
			}
		}
		if code, _ := run(t, tr, effects.Command{Argv: []string{"no-such-command-here"}}); code != 127 {
			t.Errorf("a missing command exited %d, want 127", code)
		}
		// The documented convention: 255 is "unreachable", as with ssh(1).
		_, err := tr.Run(context.Background(), effects.Command{Argv: []string{"sh", "-c", "exit 255"}})
		if !errors.Is(err, effects.ErrUnreachable) {
			t.Errorf("exit 255 = %v, want ErrUnreachable", err)
		}
	})

	t.Run("streams", func(t *testing.T) {
		in := make([]byte, 4<<20)
		_, _ = rand.Read(in)
		sum := sha256.Sum256(in)
		code, out := run(t, tr, effects.Command{Argv: []string{"sha256sum"}, Stdin: bytes.NewReader(in)})
		if code != 0 || !strings.HasPrefix(out, hex.EncodeToString(sum[:])+" ") {
			t.Fatalf("stdin did not arrive whole: %d, %q", code, out)
		}
		var stderr bytes.Buffer
		code, out = run(t, tr, effects.Command{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 5"}, Stderr: &stderr})
		if code != 5 || out != "out\n" || stderr.String() != "err\n" {
			t.Fatalf("streams: %d, stdout %q, stderr %q", code, out, stderr.String())
		}
	})

	top := bed.Build(t, "healthy", "")

	t.Run("copy closure and PATH", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := tr.CopyClosure(ctx, []string{top}); err != nil {
			t.Fatalf("CopyClosure: %v", err)
		}
		if code, _ := run(t, tr, effects.Command{Argv: []string{"nix-store", "--check-validity", top}}); code != 0 {
			t.Fatalf("%s is not valid on the node after the copy (exit %d)", top, code)
		}
		// switchyard-hello exists only in <top>/sw/bin.
		if code, _ := run(t, tr, effects.Command{Argv: []string{"switchyard-hello"}}); code != 127 {
			t.Fatalf("switchyard-hello found without the PATH append (exit %d)", code)
		}
		code, out := run(t, tr, effects.Command{Argv: []string{"switchyard-hello"}, Path: []string{top + "/sw/bin"}})
		if code != 0 || out != "hello from switchyard\n" {
			t.Fatalf("switchyard-hello with the PATH append: %d, %q", code, out)
		}
		// The node's own PATH is kept.
		code, out = run(t, tr, effects.Command{Argv: []string{"sh", "-c", `printf %s "$PATH"`}, Path: []string{top + "/sw/bin"}})
		if code != 0 || !strings.HasSuffix(out, ":"+top+"/sw/bin") || !strings.Contains(out, "/usr/bin") {
			t.Fatalf("remote PATH = %q", out)
		}
	})

	t.Run("bootloader", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := tr.FinalizeBootloader(ctx, top); err != nil {
			t.Fatalf("FinalizeBootloader: %v", err)
		}
		if got := node.Readlink(t, "/nix/var/nix/profiles/system"); got != top {
			t.Errorf("system profile = %q, want %q", got, top)
		}
		if got := node.Readlink(t, "/boot/switchyard-default"); got != top {
			t.Errorf("boot entry = %q, want %q", got, top)
		}

		// A second generation's boot entry, then back to the running one.
		next := bed.Build(t, "healthy", "shell-next")
		if err := tr.CopyClosure(ctx, []string{next}); err != nil {
			t.Fatalf("CopyClosure: %v", err)
		}
		node.MustExec(t, "ln", "-sfn", top, "/run/current-system")
		if err := tr.FinalizeBootloader(ctx, next); err != nil {
			t.Fatalf("FinalizeBootloader: %v", err)
		}
		if got := node.Readlink(t, "/boot/switchyard-default"); got != next {
			t.Fatalf("boot entry = %q, want %q", got, next)
		}
		if err := tr.RevertBootloader(ctx); err != nil {
			t.Fatalf("RevertBootloader: %v", err)
		}
		if got := node.Readlink(t, "/boot/switchyard-default"); got != top {
			t.Errorf("boot entry after the revert = %q, want %q", got, top)
		}
		node.MustExec(t, "rm", "-f", "/run/current-system")

		// A toplevel that is not on the node: the hook's error names it with stderr's last line.
		err := tr.FinalizeBootloader(ctx, "/nix/store/00000000000000000000000000000000-missing")
		if err == nil || !strings.Contains(err.Error(), "finalize_bootloader exited") || errors.Is(err, effects.ErrUnreachable) {
			t.Errorf("FinalizeBootloader of a missing toplevel = %v", err)
		}
	})
}

// TestUnreachable: a closed port is ErrUnreachable for every hook that acts on the node.
func TestUnreachable(t *testing.T) {
	bed := testbed.Require(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	knownHosts := filepath.Join(t.TempDir(), "known_hosts")
	line := "[127.0.0.1]:" + strconv.Itoa(port) + " ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
	if err := os.WriteFile(knownHosts, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := sshHooks(t, port, bed.KeyFile, knownHosts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := tr.Run(ctx, effects.Command{Argv: []string{"true"}})
	if !errors.Is(err, effects.ErrUnreachable) || code != -1 {
		t.Fatalf("Run = %d, %v; want ErrUnreachable", code, err)
	}
	if !strings.Contains(err.Error(), "remote_exec") || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("error %q does not name the hook and ssh's complaint", err)
	}
	if strings.Contains(err.Error(), bed.KeyFile) {
		t.Errorf("error %q names the key file", err)
	}
	if err := tr.RevertBootloader(ctx); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("RevertBootloader = %v; want ErrUnreachable", err)
	}
}

// recorder is a Reporter that keeps what the body reports.
type recorder struct {
	mu       sync.Mutex
	phases   []string
	logs     []string
	verdicts []verdict.Verdict
}

func (r *recorder) Phase(node, phase string, state effects.PhaseState, elapsed time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phases = append(r.phases, phase+":"+string(state))
}

func (r *recorder) Log(node, level, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, level+": "+msg)
}

func (r *recorder) Verdict(v verdict.Verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verdicts = append(r.verdicts, v)
}

// TestDeploy runs the Go deploy body over the shell transport: a healthy closure
// is copied, switched, judged OK and finalized.
func TestDeploy(t *testing.T) {
	bed := testbed.Require(t)
	node := bed.Node(t)
	top := bed.Build(t, "healthy", "")
	tr := nodeHooks(t, node)
	vars := map[string]string{
		"DEPLOY_CYCLE_INTERVAL":  "1",
		"DEPLOY_CYCLE_WINDOWS":   "2",
		"DEPLOY_SETTLE_ATTEMPTS": "3",
		"DEPLOY_EVAL_CACHE_DIR":  t.TempDir(),
	}
	cfg, err := effects.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	d := &effects.Deploy{Node: "shell-node", Transport: tr, Source: effects.Source{Toplevel: top}, Config: cfg, Reporter: rec}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res := d.Run(ctx)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if res.ExitCode != 0 || !res.Verdict.OK {
		t.Fatalf("deploy: exit %d, ok %v, reasons %q\nphases %q\nlogs %q", res.ExitCode, res.Verdict.OK, res.Verdict.Reasons, rec.phases, rec.logs)
	}
	if len(rec.verdicts) != 1 || !rec.verdicts[0].OK {
		t.Fatalf("reported verdicts: %+v", rec.verdicts)
	}
	if got, want := res.Verdict.Target, "shell root@127.0.0.1:"+strconv.Itoa(node.SSHPort); got != want {
		t.Errorf("verdict target = %q, want %q", got, want)
	}
	if res.Verdict.Switch.Result != verdict.SwitchOK {
		t.Errorf("switch result = %q", res.Verdict.Switch.Result)
	}
	for _, p := range []string{"push:done", "switch:done", "confirm:done", "finalize:done"} {
		if !contains(rec.phases, p) {
			t.Errorf("phase %s missing: %q", p, rec.phases)
		}
	}
	for path, want := range map[string]string{
		"/run/current-system":          top,
		"/nix/var/nix/profiles/system": top,
		"/boot/switchyard-default":     top,
	} {
		if got := node.Readlink(t, path); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if st := node.UnitProperties(t, "hello.service", "ActiveState")["ActiveState"]; st != "active" {
		t.Errorf("hello.service is %q", st)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
