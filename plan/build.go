package plan

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/switchyard-nix/switchyard/nix"
)

// Build is what nix/build.nix needs to evaluate a node's toplevel.
type Build struct {
	StateDir string // absolute; build.nix is <StateDir>/nix/build.nix
	Tree     string // the operator tree, absolute
	NodeDir  string // the node's directory (plan.json, configuration.nix), absolute
	System   string // "nixos", or the tree path of the builder
	Nixpkgs  string // a path to nixpkgs, for System "nixos"; may be empty
}

// EvalArgv is the nix-instantiate command that evaluates a node's toplevel derivation and
// prints its .drv path (SPEC 6.1): nix/build.nix applied to the tree, the node's
// directory and the deployment's system, attribute toplevel. It runs in EvalEnv, with
// an empty Nix search path (`nix-path`, which NIX_PATH and NIX_CONFIG set otherwise): a
// module's <nixpkgs> would read a path nixos_conf does not cover, so it fails instead.
func EvalArgv(b Build) []string {
	argv := append([]string{"nix-instantiate", "--option", "nix-path", ""}, evalArgstrs(b, "nodeDir", b.NodeDir)...)
	return append(argv, "--attr", "toplevel", "--", filepath.Join(b.StateDir, "nix", "build.nix"))
}

// evalArgstrs are the arguments build.nix and batch.nix share: the tree, the node
// directory (dirArg: one, or batch.nix's list), the system and the nixpkgs pin.
func evalArgstrs(b Build, dirArg, dir string) []string {
	args := []string{
		"--argstr", "tree", b.Tree,
		"--argstr", dirArg, dir,
		"--argstr", "system", b.System,
	}
	if b.Nixpkgs != "" {
		args = append(args, "--argstr", "nixpkgs", b.Nixpkgs)
	}
	return args
}

// BatchEvalArgv is the nix-instantiate command that evaluates several nodes' toplevel
// derivations in one Nix process (nix/batch.nix: build.nix applied to each node's
// directory), printing a JSON list of one .drv path per node, in the order of builds.
// It runs in EvalEnv, as EvalArgv does, and gives what EvalArgv gives each node. The
// nodes must share everything but their directory (one plan's nodes do), and a
// directory must be one line (they are passed one per line); otherwise there is no
// batch command and each node is evaluated on its own.
func BatchEvalArgv(builds []Build) ([]string, error) {
	if len(builds) == 0 {
		return nil, errors.New("batch evaluation: no nodes")
	}
	first := builds[0]
	dirs := make([]string, 0, len(builds))
	for _, b := range builds {
		if b.StateDir != first.StateDir || b.Tree != first.Tree || b.System != first.System || b.Nixpkgs != first.Nixpkgs {
			return nil, errors.New("batch evaluation: the nodes differ in more than their directory")
		}
		if b.NodeDir == "" || strings.ContainsAny(b.NodeDir, "\n\r") {
			return nil, errors.New("batch evaluation: a node directory that is not one line")
		}
		dirs = append(dirs, b.NodeDir)
	}
	argv := []string{"nix-instantiate", "--eval", "--strict", "--json", "--read-write-mode", "--option", "nix-path", "",
		"--argstr", "build", filepath.Join(first.StateDir, "nix", "build.nix"),
	}
	argv = append(argv, evalArgstrs(first, "nodeDirs", strings.Join(dirs, "\n"))...)
	return append(argv, "--expr", string(nix.File("batch.nix"))), nil
}

// evalEnvironment is what a node's evaluation keeps of the caller's environment: the
// variables Nix itself reads to reach its store, its daemon, its configuration and the
// network (a fetcher pinned by hash), and the home and temporary directories. Nothing
// else reaches it: builtins.getEnv of any other name reads "" (a read nixos_conf would
// not cover; tree files that name one are refused when planning), and NIX_PATH is gone.
var evalEnvironment = []string{
	"HOME", "TMPDIR",
	"NIX_REMOTE", "NIX_DAEMON_SOCKET_PATH", "NIX_STORE_DIR", "NIX_STATE_DIR", "NIX_LOG_DIR",
	"NIX_CONF_DIR", "NIX_USER_CONF_FILES", "NIX_CONFIG",
	"XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
	"NIX_SSL_CERT_FILE", "SSL_CERT_FILE",
	"http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy",
	"HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "ALL_PROXY", "NO_PROXY",
}

// EvalEnv is the environment EvalArgv runs in (exec.Cmd.Env): the variables of
// evalEnvironment that lookup (the caller's environment) has set.
func EvalEnv(lookup func(string) (string, bool)) []string {
	env := []string{}
	for _, name := range evalEnvironment {
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}
