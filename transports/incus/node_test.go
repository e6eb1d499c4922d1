package incus

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/nixserve"
)

// An unreachable daemon socket fails a Run as unreachable; no test bed needed.
func TestRunNoDaemon(t *testing.T) {
	tr, err := New(Config{Instance: "nowhere", Socket: filepath.Join(t.TempDir(), "unix.socket")})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	_, err = tr.Run(context.Background(), effects.Command{Argv: []string{"true"}})
	if !errors.Is(err, effects.ErrUnreachable) {
		t.Fatalf("Run with no daemon: %v, want ErrUnreachable", err)
	}
	if err := tr.CopyClosure(context.Background(), []string{"/nix/store/x"}); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("CopyClosure with no daemon: %v, want ErrUnreachable", err)
	}
}

func TestConfig(t *testing.T) {
	t.Setenv("INCUS_DIR", "/srv/incus")
	tr, err := New(Config{Instance: "web1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Target(); got != "incus default/web1" {
		t.Errorf("Target %q", got)
	}
	if tr.cfg.Socket != "/srv/incus/unix.socket" {
		t.Errorf("socket %q", tr.cfg.Socket)
	}
	tr, err = New(Config{Instance: "web1", Project: "tenant-a", Socket: "/run/x.socket"})
	if err != nil || tr.Target() != "incus tenant-a/web1" || tr.cfg.Socket != "/run/x.socket" {
		t.Errorf("project tenant-a: %v %q", err, tr.Target())
	}
	for _, bad := range []Config{{}, {Instance: "a/b"}, {Instance: "web1", Project: "p?x"}} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
	if _, err := commandPath([]string{"/a:/b"}); err == nil {
		t.Error("a PATH directory with ':' accepted")
	}
}

// newNode launches a node and a transport to it.
func newNode(t *testing.T) (*testbed.Bed, *testbed.Node, *Transport) {
	bed := testbed.Require(t)
	node := bed.Node(t)
	tr, err := New(Config{Instance: node.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return bed, node, tr
}

func TestNodeRun(t *testing.T) {
	_, node, tr := newNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(cmd effects.Command) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code, err := tr.Run(ctx, cmd)
		if err != nil {
			t.Fatalf("Run %q: %v", cmd.Argv, err)
		}
		return code, stdout.String(), stderr.String()
	}

	if code, out, _ := run(effects.Command{Argv: []string{"cat"}, Stdin: strings.NewReader("hello\nworld\n")}); code != 0 || out != "hello\nworld\n" {
		t.Errorf("cat: exit %d, stdout %q", code, out)
	}
	if code, out, _ := run(effects.Command{Argv: []string{"cat"}}); code != 0 || out != "" {
		t.Errorf("cat without stdin: exit %d, stdout %q", code, out)
	}
	// Argv as it is: no shell reads it.
	if code, out, _ := run(effects.Command{Argv: []string{"echo", "$HOME", "a  b", "'q'"}}); code != 0 || out != "$HOME a  b 'q'\n" {
		t.Errorf("echo: exit %d, stdout %q", code, out)
	}
	if code, out, errOut := run(effects.Command{Argv: []string{"sh", "-c", "echo out; echo oops >&2; exit 3"}}); code != 3 || out != "out\n" || errOut != "oops\n" {
		t.Errorf("exit 3: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := run(effects.Command{Argv: []string{"sy-no-such-command"}}); code != 127 || !strings.Contains(errOut, "sy-no-such-command: command not found") {
		t.Errorf("a missing command: exit %d, stderr %q; want 127", code, errOut)
	}

	// 4 MiB through cat, both ways.
	big := make([]byte, 4<<20)
	_, _ = rand.Read(big)
	var got bytes.Buffer
	code, err := tr.Run(ctx, effects.Command{Argv: []string{"cat"}, Stdin: bytes.NewReader(big), Stdout: &got})
	if err != nil || code != 0 || !bytes.Equal(got.Bytes(), big) {
		t.Errorf("4 MiB through cat: exit %d, %v, %d bytes back, equal %v", code, err, got.Len(), bytes.Equal(got.Bytes(), big))
	}

	// Path is appended to PATH: a program found only there runs by its name.
	node.MustExec(t, "mkdir", "-p", "/opt/sy extra")
	node.MustExec(t, "sh", "-c", `printf '#!/bin/sh\necho from-extra\n' > "/opt/sy extra/sy-extra-tool"; chmod +x "/opt/sy extra/sy-extra-tool"`)
	if code, out, _ := run(effects.Command{Argv: []string{"sy-extra-tool"}, Path: []string{"/opt/sy extra"}}); code != 0 || out != "from-extra\n" {
		t.Errorf("a program of Path: exit %d, stdout %q", code, out)
	}
	if code, out, _ := run(effects.Command{Argv: []string{"sh", "-c", `echo "$PATH"`}, Path: []string{"/opt/sy extra", "/opt/two"}}); code != 0 ||
		!strings.HasSuffix(out, ":/bin:/opt/sy extra:/opt/two\n") {
		t.Errorf("PATH: exit %d, %q", code, out)
	}
	if code, _, _ := run(effects.Command{Argv: []string{"sy-extra-tool"}}); code != 127 {
		t.Errorf("a program of another command's Path: exit %d, want 127", code)
	}

	// A cancelled ctx stops the wait and the command.
	cctx, ccancel := context.WithTimeout(ctx, time.Second)
	defer ccancel()
	start := time.Now()
	_, err = tr.Run(cctx, effects.Command{Argv: []string{"sh", "-c", "echo started > /tmp/sy-sleep; exec sleep 120"}})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("cancelled Run: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("cancelled Run returned after %v", took)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _ := node.Exec(ctx, "sh", "-c", "pgrep -x sleep || true")
		if strings.TrimSpace(out) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the cancelled command still runs: %q", out)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A missing instance and a stopped one are unreachable.
	missing, err := New(Config{Instance: node.Name + "-gone"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := missing.Run(ctx, effects.Command{Argv: []string{"true"}}); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("a missing instance: %v, want ErrUnreachable", err)
	} else {
		t.Logf("a missing instance: %v", err)
	}
	if _, err := (&Transport{cfg: Config{Instance: node.Name, Project: "sy-no-such-project"}, c: tr.c}).Run(ctx,
		effects.Command{Argv: []string{"true"}}); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("a missing project: %v, want ErrUnreachable", err)
	}
	if out, err := exec.CommandContext(ctx, "incus", "stop", "--force", node.Name).CombinedOutput(); err != nil {
		t.Fatalf("incus stop: %v: %s", err, out)
	}
	if _, err := tr.Run(ctx, effects.Command{Argv: []string{"true"}}); !errors.Is(err, effects.ErrUnreachable) {
		t.Errorf("a stopped instance: %v, want ErrUnreachable", err)
	} else {
		t.Logf("a stopped instance: %v", err)
	}
}

// TestNodeCopyClosure copies a test toplevel into a node, where it becomes
// valid; a second copy sends nothing; finalize points the system profile at it.
func TestNodeCopyClosure(t *testing.T) {
	bed, node, tr := newNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	toplevel := bed.Build(t, "healthy", "incus-copy")
	closure, err := nixserve.LocalStore{}.Closure(ctx, []string{toplevel})
	if err != nil {
		t.Fatal(err)
	}
	if len(closure) < 2 {
		t.Fatalf("closure %q", closure)
	}
	if err := tr.CopyClosure(ctx, []string{toplevel}); err != nil {
		t.Fatalf("copy: %v", err)
	}
	if st := tr.LastCopy(); st.Paths != len(closure) || st.Missing != len(closure) || st.Sent != len(closure) || st.Bytes == 0 {
		t.Errorf("copy: stats %+v, closure of %d", st, len(closure))
	}
	node.MustExec(t, append([]string{"nix-store", "--check-validity"}, closure...)...)
	node.MustExec(t, append([]string{"nix-store", "--verify-path"}, closure...)...)

	if err := tr.CopyClosure(ctx, []string{toplevel}); err != nil {
		t.Fatalf("second copy: %v", err)
	}
	if paths, missing, sent, _ := tr.CopyCounts(); paths != len(closure) || missing != 0 || sent != 0 {
		t.Errorf("second copy: %d paths, %d missing, %d sent", paths, missing, sent)
	}

	// Finalize and revert of the copied toplevel (TestNodeBootloader covers them on
	// toplevels made in the node). A test closure is shaped like a NixOS toplevel;
	// one without an init is refused, /sbin/init left as it is.
	initBefore := strings.TrimSpace(node.MustExec(t, "readlink", "/sbin/init"))
	_, noInit := node.Exec(ctx, "test", "-e", toplevel+"/init")
	err = tr.FinalizeBootloader(ctx, toplevel)
	switch {
	case noInit != nil:
		t.Logf("the test closure %s has no init: finalize refused it: %v", toplevel, err)
		if err == nil || !strings.Contains(err.Error(), "has neither init nor prepare-root") {
			t.Errorf("finalize of a toplevel without init: %v, want a refusal", err)
		}
		if got := strings.TrimSpace(node.MustExec(t, "readlink", "/sbin/init")); got != initBefore {
			t.Errorf("/sbin/init -> %q after a refused finalize, want it unchanged (%q)", got, initBefore)
		}
	case err != nil:
		t.Fatalf("finalize: %v", err)
	default:
		if got := strings.TrimSpace(node.MustExec(t, "readlink", "/sbin/init")); got != toplevel+"/init" {
			t.Errorf("/sbin/init -> %q, want %q", got, toplevel+"/init")
		}
	}
	if got := strings.TrimSpace(node.MustExec(t, "readlink", "-f", "/nix/var/nix/profiles/system")); got != toplevel {
		t.Errorf("system profile -> %q, want %q", got, toplevel)
	}
	if err := tr.RevertBootloader(ctx); err == nil || !strings.Contains(err.Error(), "no running generation") {
		t.Errorf("revert on a node without /run/current-system: %v, want an error saying there is no running generation", err)
	}

	// A node without nix-store: the copy fails, naming the remote command.
	node.MustExec(t, "mv", "/usr/bin/nix-store", "/usr/bin/nix-store.off")
	err = tr.CopyClosure(ctx, []string{toplevel})
	if err == nil || !strings.Contains(err.Error(), "nix-store --serve on the node exited 127") {
		t.Errorf("copy to a node without nix-store: %v", err)
	}
}

// makeToplevel adds a store path to the node's store (nix-store --add, in the node)
// holding the given executable files: a toplevel as far as the bootloader hooks look.
func makeToplevel(t *testing.T, node *testbed.Node, name string, files ...string) string {
	t.Helper()
	dir := "/tmp/sy-boot/" + name
	node.MustExec(t, "mkdir", "-p", dir)
	for _, f := range files {
		node.MustExec(t, "sh", "-c", `printf '#!/bin/sh\nexec /lib/systemd/systemd "$@"\n' > "$1"; chmod 755 "$1"`, "sh", dir+"/"+f)
	}
	node.MustExec(t, "touch", dir+"/nixos-version") // never an empty directory
	top := strings.TrimSpace(node.MustExec(t, "nix-store", "--add", dir))
	if !strings.HasPrefix(top, "/nix/store/") {
		t.Fatalf("nix-store --add %s: %q", dir, top)
	}
	return top
}

// A container's boot entry is /sbin/init (nixpkgs' lxc-container.nix): finalize sets
// the system profile and points /sbin/init at <toplevel>/init (prepare-root when the
// toplevel has one), revert points it at the running generation's init, resolved
// (never through /run/current-system), and leaves the profile. A toplevel with neither
// is refused and /sbin/init left alone. The node is a throwaway Debian container: its
// own /sbin/init (systemd) is replaced, so it would not boot again.
func TestNodeBootloader(t *testing.T) {
	_, node, tr := newNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sbinInit := func() string { return strings.TrimSpace(node.MustExec(t, "readlink", "/sbin/init")) }
	profile := func() string {
		return strings.TrimSpace(node.MustExec(t, "readlink", "-f", "/nix/var/nix/profiles/system"))
	}
	running := makeToplevel(t, node, "running", "init")
	next := makeToplevel(t, node, "next", "init")
	initrd := makeToplevel(t, node, "systemd-initrd", "init", "prepare-root")
	bare := makeToplevel(t, node, "bare")

	if vm, err := tr.isVM(ctx); err != nil || vm {
		t.Fatalf("isVM of a test-bed container = %v, %v", vm, err)
	}
	// No running generation: revert refuses and touches nothing.
	before := sbinInit()
	if err := tr.RevertBootloader(ctx); err == nil || !strings.Contains(err.Error(), "no running generation") {
		t.Errorf("revert without /run/current-system: %v", err)
	}
	if got := sbinInit(); got != before {
		t.Errorf("/sbin/init -> %q after a refused revert, want %q", got, before)
	}

	node.MustExec(t, "ln", "-sfn", running, "/run/current-system")
	if err := tr.FinalizeBootloader(ctx, next); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	if got := sbinInit(); got != next+"/init" {
		t.Errorf("/sbin/init -> %q after finalize, want %q", got, next+"/init")
	}
	if got := profile(); got != next {
		t.Errorf("system profile -> %q after finalize, want %q", got, next)
	}

	if err := tr.RevertBootloader(ctx); err != nil {
		t.Fatalf("revert: %v", err)
	}
	if got := sbinInit(); got != running+"/init" {
		t.Errorf("/sbin/init -> %q after revert, want the running generation's %q", got, running+"/init")
	}
	if got := profile(); got != next {
		t.Errorf("system profile -> %q after revert, want it left at %q", got, next)
	}

	if err := tr.FinalizeBootloader(ctx, initrd); err != nil {
		t.Fatalf("finalize of a toplevel with prepare-root: %v", err)
	}
	if got := sbinInit(); got != initrd+"/prepare-root" {
		t.Errorf("/sbin/init -> %q, want %q (a systemd initrd's stage 2)", got, initrd+"/prepare-root")
	}

	before = sbinInit()
	err := tr.FinalizeBootloader(ctx, bare)
	if err == nil || !strings.Contains(err.Error(), "has neither init nor prepare-root") {
		t.Errorf("finalize of a toplevel without init: %v, want a refusal", err)
	}
	if got := sbinInit(); got != before {
		t.Errorf("/sbin/init -> %q after a refused finalize, want %q", got, before)
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string][2]string{
		"web1": {"", "web1"}, "local:web1": {"", "web1"}, "none:web1": {"", "web1"}, ":web1": {"", "web1"},
		"prod:web1": {"prod", "web1"},
	} {
		if remote, got, err := ParseTarget(in); err != nil || remote != want[0] || got != want[1] {
			t.Errorf("ParseTarget(%q) = %q, %q, %v; want %q", in, remote, got, err, want)
		}
	}
	for _, bad := range []string{"", "local:", "prod:", "a/b", "prod:a/b", "a b:web1"} {
		if _, _, err := ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) accepted", bad)
		}
	}
}
