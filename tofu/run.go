package tofu

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-version"

	"github.com/switchyard-nix/switchyard/redact"
)

// ApplyArgs is the argv (after the binary) of the apply switchyard runs itself:
// -json for the machine-readable stream, the targets of a subset run, and
// -parallelism, the nodes deployed at once. The flags are those terraform-exec's
// Apply gives, which this run stands in for (see Workspace.Run).
func ApplyArgs(json bool, targets []string, parallelism int) []string {
	args := []string{"apply", "-no-color", "-auto-approve", "-input=false", "-lock=true"}
	if parallelism > 0 {
		args = append(args, "-parallelism="+strconv.Itoa(parallelism))
	}
	for _, t := range targets {
		args = append(args, "-target="+t)
	}
	if json {
		args = append(args, "-json")
	}
	return args
}

// interruptGrace is how long a cancelled OpenTofu run has, after SIGINT, to release
// the state lock and stop its providers before it is killed (terraform-exec waits as
// long).
const interruptGrace = 10 * time.Second

// Run runs OpenTofu with args in the workspace, its environment and TF_IN_AUTOMATION
// (as terraform-exec sets it), stdout and stderr to the writers given. A cancelled
// ctx sends SIGINT, then kills after interruptGrace. It is terraform-exec's run
// without the `version` run terraform-exec makes before its first command, which
// costs a no-op apply a tenth of its time (issue 14 item 3): the version is checked
// once per binary instead (CachedVersion). The error of a failed run carries the end
// of its stderr, as terraform-exec's does, so a held state lock is recognised
// (LockError).
func (w *Workspace) Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, w.Bin, args...)
	cmd.Dir = w.Dir
	cmd.Env = append(EnvList(w.Env), "TF_IN_AUTOMATION=1")
	// As terraform-exec: OpenTofu in a process group of its own (a terminal's ^C
	// reaches switchyard, which cancels ctx), killed should switchyard die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = interruptGrace
	tail := &tailBuffer{max: 8 << 10}
	// What OpenTofu prints may quote a credential (a backend's error, a provider's
	// diagnostic): it reaches the writers, and the error, redacted (SPEC 6.9).
	out := redact.Default.NewWriter(orDiscard(stdout))
	if slices.Contains(args, "-json") {
		out = redact.Default.NewJSONWriter(orDiscard(stdout))
	}
	errw := redact.Default.NewWriter(orDiscard(stderr))
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(errw, tail)
	err := cmd.Run()
	out.Flush()
	errw.Flush()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("tofu %s: %w", args[0], ctx.Err())
	}
	return fmt.Errorf("tofu %s: %w: %s", args[0], err, redact.Default.String(strings.TrimSpace(tail.String())))
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return t.buf.String() }

// versionMark is the file, in the working directory, holding the version of the
// OpenTofu binary it was last used with, keyed by that binary's identity.
const versionMark = ".switchyard-version"

// binaryKey identifies an executable by path, size, modification time and inode:
// another file there is another binary. "" when it cannot be read.
func binaryKey(bin string) string {
	fi, err := os.Stat(bin)
	if err != nil {
		return ""
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%s %d %d %d", bin, fi.Size(), fi.ModTime().UnixNano(), ino)
}

// CachedVersion is the version SaveVersion recorded for the workspace's OpenTofu
// binary, nil when none was recorded for this very binary.
func (w *Workspace) CachedVersion() *version.Version {
	key := binaryKey(w.Bin)
	b, err := os.ReadFile(filepath.Join(w.Dir, versionMark))
	if key == "" || err != nil {
		return nil
	}
	k, v, ok := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if !ok || k != key {
		return nil
	}
	ver, err := version.NewVersion(v)
	if err != nil {
		return nil
	}
	return ver
}

// SaveVersion records v as the version of the workspace's OpenTofu binary.
func (w *Workspace) SaveVersion(v *version.Version) error {
	key := binaryKey(w.Bin)
	if key == "" {
		return nil
	}
	return writeFile(filepath.Join(w.Dir, versionMark), []byte(key+"\n"+v.String()+"\n"))
}
