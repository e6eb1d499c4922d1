package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/switchyard-nix/switchyard/console"
	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/methods"
	"github.com/switchyard-nix/switchyard/transports"
)

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// deployFlags are `switchyard deploy`'s flags (SPEC 2).
type deployFlags struct {
	transport, target, node, knownHosts, sshConfig, hooks, project, output string
	sshKeys                                                                multiFlag
	source                                                                 effects.Source
	noSubstitute                                                           bool
	reboot                                                                 bool
	rebootTimeout                                                          time.Duration
}

// deployFlagSet declares `switchyard deploy`'s flags into f; the usage text prints the
// same set.
func deployFlagSet(f *deployFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("deploy", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.transport, "transport", "ssh", "how the node is reached, `KIND`: ssh, incus or shell")
	fs.StringVar(&f.target, "target", "", "the node, `T`: ssh [user@]host[:port]; incus [remote:]instance (remote: of the Incus client configuration, $INCUS_CONF or ~/.config/incus)")
	fs.StringVar(&f.node, "node", "", "the node's `NAME` in messages (default: the target's host)")
	fs.Var(&f.sshKeys, "ssh-key", "a private key `FILE` (repeatable; then the ssh configuration's IdentityFile, the ssh agent, ~/.ssh/id_ed25519, id_ecdsa, id_rsa)")
	fs.StringVar(&f.knownHosts, "known-hosts", "", "the known_hosts `FILE` (default: ~/.ssh/known_hosts)")
	fs.StringVar(&f.sshConfig, "ssh-config", "", "the ssh_config `FILE`: HostName, Port, User, IdentityFile, ProxyJump (default: ~/.ssh/config; none: no file)")
	fs.StringVar(&f.hooks, "hooks", "", "the shell transport's prologue `FILE` (--transport shell)")
	fs.StringVar(&f.project, "project", "", "the Incus `PROJECT` (default: the remote's, else default)")
	fs.StringVar(&f.output, "output", "text", "`FORMAT`: text or json")
	fs.StringVar(&f.source.Toplevel, "toplevel", "", "an already built toplevel `STOREPATH`")
	fs.StringVar(&f.source.Drv, "drv", "", "a derivation `DRVPATH` to realise")
	fs.StringVar(&f.source.Expr, "expr", "", "a Nix `FILE` to evaluate and build")
	fs.StringVar(&f.source.Attr, "attr", "", "the attribute `A` of --expr")
	fs.BoolVar(&f.noSubstitute, "no-substitute", false, "stream every path the node lacks: the node does not first fetch from the binary caches of its own Nix configuration (ssh and incus)")
	fs.BoolVar(&f.reboot, "reboot", false, "as apply --reboot (--transport ssh): reboot the node once its boot entry points at the new generation and judge the system it booted")
	fs.DurationVar(&f.rebootTimeout, "reboot-timeout", effects.DefaultRebootTimeout, "with --reboot, how long the node may take to come back, `DURATION`")
	return fs
}

func parseDeployFlags(args []string) (deployFlags, error) {
	var f deployFlags
	fs := deployFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.output != "text" && f.output != "json" {
		return f, fmt.Errorf("--output: %q is not text or json", f.output)
	}
	if f.target == "" && f.transport != "shell" {
		return f, fmt.Errorf("--target is required")
	}
	if f.reboot && f.transport != "ssh" {
		return f, fmt.Errorf("--reboot: only with --transport ssh")
	}
	if f.rebootTimeout <= 0 {
		return f, fmt.Errorf("--reboot-timeout: %s is not a duration greater than 0", f.rebootTimeout)
	}
	return f, nil
}

// runDeploy is `switchyard deploy`: the deploy body on one node.
func runDeploy(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	f, err := parseDeployFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		writeDeployUsage(stdout)
		return exitcode.OK
	}
	if err != nil {
		return refuse(stderr, fmt.Sprintf("switchyard deploy: %v", err), writeDeployUsage)
	}
	cfg, err := effects.ConfigFromEnv(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard deploy: %v\n", err)
		return exitcode.Refused
	}
	cfg.Reboot, cfg.RebootTimeout = f.reboot && !cfg.VerdictOnly, f.rebootTimeout
	if !cfg.VerdictOnly {
		if err := f.source.Validate(); err != nil {
			fmt.Fprintf(stderr, "switchyard deploy: %v\n", err)
			return exitcode.Refused
		}
	}
	transport, node, err := newTransport(f)
	if err != nil {
		fmt.Fprintf(stderr, "switchyard deploy: %v\n", err)
		return exitcode.Refused
	}
	defer transport.Close()
	if f.node != "" {
		node = f.node
	}

	var out methods.Reporter = console.NewText(stdout, stderr)
	if f.output == "json" {
		out = newJSONOutput(stdout)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	res := (&effects.Deploy{Node: node, Transport: transport, Source: f.source, Config: cfg, Reporter: out}).Run(ctx)
	okCount := 0
	if res.ExitCode == exitcode.OK {
		okCount = 1
	}
	out.Summary(1, okCount, 1-okCount, res.ExitCode)
	return res.ExitCode
}

// newTransport builds the transport the flags name (through transports.Open), and
// the node's default name.
func newTransport(f deployFlags) (effects.Transport, string, error) {
	spec, name, err := transports.ParseTarget(transports.Kind(f.transport), f.target)
	switch {
	case errors.Is(err, transports.ErrUnknownKind):
		return nil, "", errors.New("--transport: want ssh, incus or shell")
	case err != nil:
		return nil, "", fmt.Errorf("--target: %w", err)
	case spec.Kind == transports.Shell && f.hooks == "":
		return nil, "", errors.New("--transport shell needs --hooks FILE")
	}
	spec.SSH.KnownHostsFile, spec.SSH.KeyFiles, spec.SSH.SSHConfigFile = f.knownHosts, f.sshKeys, f.sshConfig
	spec.Incus.Project, spec.Shell.Hooks = f.project, f.hooks
	spec.SSH.NoSubstitute, spec.Incus.NoSubstitute = f.noSubstitute, f.noSubstitute
	t, err := transports.Open(spec)
	if err != nil && spec.Kind == transports.Shell {
		return nil, "", fmt.Errorf("--hooks: %w", err)
	}
	return t, name, err
}
