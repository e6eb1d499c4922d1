package tofu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"
)

// Session is one switchyard run's OpenTofu in its prepared working directory
// (Workspace): terraform-exec's handle on it and the writers OpenTofu's human output
// goes to, with one method per verb the tf methods use. Every method takes a context
// whose cancellation stops the OpenTofu process it runs. A Session is not safe for
// concurrent use: its verbs run one after the other.
type Session struct {
	ws             *Workspace
	tf             *tfexec.Terraform
	stdout, stderr io.Writer // OpenTofu's human output (never nil)
}

// Session opens a session on the workspace, OpenTofu's human output going to stdout
// and stderr (nil: nowhere).
func (w *Workspace) Session(stdout, stderr io.Writer) (*Session, error) {
	tf, err := w.terraform()
	if err != nil {
		return nil, fmt.Errorf("OpenTofu in %s: %w", w.Dir, err)
	}
	return &Session{ws: w, tf: tf, stdout: orDiscard(stdout), stderr: orDiscard(stderr)}, nil
}

// Silent is the same session with OpenTofu's human output going nowhere: for the
// runs switchyard makes for itself (the plan a rollout's stages come from), which
// are not the operator's to read.
func (s *Session) Silent() *Session {
	quiet := *s
	quiet.stdout, quiet.stderr = io.Discard, io.Discard
	return &quiet
}

// output points terraform-exec's streams before a command: every verb sets them,
// since sessions (Silent) share the handle.
func (s *Session) output(stdout, stderr io.Writer) {
	s.tf.SetStdout(stdout)
	s.tf.SetStderr(stderr)
}

// Options are what a verb runs on, and how.
type Options struct {
	// Events gets OpenTofu's machine-readable stream (-json); nil: its human output
	// goes to the session's writers.
	Events io.Writer
	// Targets are the -target addresses of a subset run; none: the whole graph.
	Targets []string
	// Parallelism is -parallelism, the resources (nodes) worked on at once; 0:
	// OpenTofu's default.
	Parallelism int
}

// PlanOptions are a plan's Options, where it saves the plan and whether it reads
// the resources back first.
type PlanOptions struct {
	Options
	Out       string // the saved plan's file
	NoRefresh bool   // plan against the state as recorded: nothing is asked (plan --offline)
}

// File is the path of a file named name in the working directory.
func (s *Session) File(name string) string { return filepath.Join(s.ws.Dir, name) }

// Layout is where main.tf.json places the nodes' deployments.
func (s *Session) Layout() Layout { return s.ws.Layout() }

// Relayout writes main.tf.json again with the nodes' deployments placed by l
// (Workspace.Relayout), and hands OpenTofu the provider's run that goes with it.
func (s *Session) Relayout(l Layout) error {
	if err := s.ws.Relayout(l); err != nil {
		return err
	}
	return s.tf.SetEnv(s.ws.Env)
}

// SetApplied writes main.tf.json again keeping applied as the groups' applied
// submissions (Workspace.SetApplied).
func (s *Session) SetApplied(applied map[string][]string) error {
	if err := s.ws.SetApplied(applied); err != nil {
		return err
	}
	return s.tf.SetEnv(s.ws.Env)
}

// Version is OpenTofu's version, checked (CheckVersion). It is asked once per
// binary and recorded in the working directory: terraform-exec would ask it before
// its first command of every run, and Apply runs without it (Workspace.Run).
func (s *Session) Version(ctx context.Context) (*version.Version, error) {
	if v := s.ws.CachedVersion(); v != nil {
		return CheckVersion(v, nil)
	}
	s.output(io.Discard, io.Discard) // the version is what it gives, not what it prints
	v, _, err := s.tf.Version(ctx, false)
	ver, err := CheckVersion(v, err)
	if err != nil {
		return nil, err
	}
	return ver, s.ws.SaveVersion(ver)
}

// Init initialises the working directory, unless it was initialised for the same
// OpenTofu, provider, backend and CLI configuration (Workspace.Initialized): init
// would change nothing then (issue 14: a no-op apply costs one OpenTofu run besides
// the version check). Its output is kept for the error only.
func (s *Session) Init(ctx context.Context) error {
	if s.ws.Initialized {
		return nil
	}
	var out strings.Builder
	s.output(&out, &out)
	if err := s.tf.Init(ctx, InitOptions()...); err != nil {
		return fmt.Errorf("tofu init failed: %w: %s", err, lastLines(out.String(), 3))
	}
	return s.ws.MarkInitialized()
}

// lastLines is the last n lines of s, on one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " ")
}

// Plan is `plan`, saved to o.Out.
func (s *Session) Plan(ctx context.Context, o PlanOptions) error {
	s.output(s.stdout, s.stderr)
	var err error
	if o.Events != nil {
		_, err = s.tf.PlanJSON(ctx, o.Events, planOptions(o)...)
	} else {
		_, err = s.tf.Plan(ctx, planOptions(o)...)
	}
	return err
}

// ShowPlan reads a saved plan (`show -json`).
func (s *Session) ShowPlan(ctx context.Context, file string) (*tfjson.Plan, error) {
	s.output(io.Discard, s.stderr) // the plan is what it gives, not what it prints
	return s.tf.ShowPlanFile(ctx, file)
}

// Apply is `apply`, run by switchyard itself (Workspace.Run, ApplyArgs), not by
// terraform-exec.
func (s *Session) Apply(ctx context.Context, o Options) error {
	args := ApplyArgs(o.Events != nil, o.Targets, o.Parallelism)
	if o.Events != nil {
		return s.ws.Run(ctx, args, o.Events, nil)
	}
	return s.ws.Run(ctx, args, s.stdout, s.stderr)
}

// Destroy is `destroy`.
func (s *Session) Destroy(ctx context.Context, o Options) error {
	s.output(s.stdout, s.stderr)
	if o.Events != nil {
		return s.tf.DestroyJSON(ctx, o.Events, destroyOptions(o)...)
	}
	return s.tf.Destroy(ctx, destroyOptions(o)...)
}

// Refresh is `refresh`.
func (s *Session) Refresh(ctx context.Context, o Options) error {
	s.output(s.stdout, s.stderr)
	if o.Events != nil {
		return s.tf.RefreshJSON(ctx, o.Events, refreshOptions(o)...)
	}
	return s.tf.Refresh(ctx, refreshOptions(o)...)
}

// planOptions are terraform-exec's options of a plan.
func planOptions(o PlanOptions) []tfexec.PlanOption {
	opts := targets[tfexec.PlanOption](o.Targets)
	opts = append(opts, tfexec.Out(o.Out))
	if o.Parallelism > 0 {
		opts = append(opts, tfexec.Parallelism(o.Parallelism))
	}
	if o.NoRefresh {
		opts = append(opts, tfexec.Refresh(false))
	}
	return opts
}

// destroyOptions are terraform-exec's options of a destroy.
func destroyOptions(o Options) []tfexec.DestroyOption {
	opts := targets[tfexec.DestroyOption](o.Targets)
	if o.Parallelism > 0 {
		opts = append(opts, tfexec.Parallelism(o.Parallelism))
	}
	return opts
}

// refreshOptions are terraform-exec's options of a refresh: it reads every targeted
// resource back, at OpenTofu's own parallelism.
func refreshOptions(o Options) []tfexec.RefreshCmdOption {
	return targets[tfexec.RefreshCmdOption](o.Targets)
}

// targets are the -target options of addrs as the option type of one command
// (each command's options are an interface of their own, which TargetOption
// implements).
func targets[O any](addrs []string) []O {
	out := make([]O, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, any(tfexec.Target(a)).(O))
	}
	return out
}

// ReadState is the backend's state as `state pull` gives it. A local state is read
// from its file, as state pull would read it (neither takes the lock), without an
// OpenTofu process.
func (s *Session) ReadState(ctx context.Context) ([]byte, error) {
	if s.ws.Backend.Kind == "local" {
		b, err := os.ReadFile(s.ws.Backend.Path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return b, err
	}
	st, err := s.statePull(ctx)
	return []byte(st), err
}

// statePull is `state pull`, which prints the state it gives: not to the writers.
func (s *Session) statePull(ctx context.Context) (string, error) {
	s.output(io.Discard, s.stderr)
	return s.tf.StatePull(ctx)
}

// Seed gives the backend an empty state, as OpenTofu version v writes one, when it
// holds none, so that the first run's self-read (SelfRead) finds a state instead of
// failing. A state that exists is never touched. The push takes the state lock, so
// a run holding it makes Seed fail with ErrStateLocked.
func (s *Session) Seed(ctx context.Context, v string) error {
	if s.ws.Backend.Kind == "local" {
		// Cheap case: no OpenTofu process when the state file is there.
		if fi, err := os.Stat(s.ws.Backend.Path); err == nil && fi.Size() > 0 {
			return nil
		}
	}
	if ok, err := s.stateHeld(ctx); err != nil || ok {
		return err
	}
	empty, err := EmptyState(v)
	if err != nil {
		return err
	}
	file := s.File("empty.tfstate")
	if err := writeFile(file, empty); err != nil {
		return err
	}
	defer os.Remove(file)
	s.output(io.Discard, s.stderr)
	if err := s.tf.StatePush(ctx, file); err != nil {
		if lerr := LockError(false, err); lerr != nil {
			return lerr
		}
		// Another run may have seeded it first (its lineage differs from ours).
		if ok, _ := s.stateHeld(ctx); ok {
			return nil
		}
		return err
	}
	return nil
}

// stateHeld says whether the backend holds a state: pg's init leaves a placeholder
// state without a lineage, which the self-read takes for none.
func (s *Session) stateHeld(ctx context.Context) (bool, error) {
	st, err := s.statePull(ctx)
	if err != nil || strings.TrimSpace(st) == "" {
		return false, err
	}
	var head struct{ Lineage string }
	if err := json.Unmarshal([]byte(st), &head); err != nil {
		return false, fmt.Errorf("state pull: %w", err)
	}
	return head.Lineage != "", nil
}

// Raw is `run -- <args>`: OpenTofu with the generated configuration, in the
// foreground (the user's input and output, switchyard's process group: it may be
// interactive). An exit status other than 0 is an error naming it.
//
// ctx is checked before the start only: a cancelled run is the user's ^C, which
// reaches OpenTofu itself, sharing the terminal's process group; a second SIGINT
// from switchyard would make it exit at once, leaving the state lock held.
func (s *Session) Raw(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("tofu %s: %w", strings.Join(args, " "), err)
	}
	cmd := s.ws.Command(args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("tofu %s: exit %d", strings.Join(args, " "), ee.ExitCode())
	}
	return err
}
