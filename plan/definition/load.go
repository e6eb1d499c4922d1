package definition

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/switchyard-nix/switchyard/localcmd"
	"github.com/switchyard-nix/switchyard/nix"
	"github.com/switchyard-nix/switchyard/plan/field"
	"github.com/switchyard-nix/switchyard/plan/tree"
)

// The definition files at a tree's root, in the order they are looked for.
const (
	NixFile  = "deployment.nix"
	JSONFile = "deployment.json"
)

// EvalError is a deployment.nix that Nix could not evaluate (exit 3: evaluation failed).
type EvalError struct {
	Argv   []string
	Err    error
	Stderr string
}

func (e *EvalError) Error() string {
	return fmt.Sprintf("evaluating %s: %v: %s", NixFile, e.Err, e.Stderr)
}

func (e *EvalError) Unwrap() error { return e.Err }

// EvalArgv is the command that evaluates the tree's deployment.nix to data: the
// expression of nix/definition.nix applied to the tree's absolute path.
func EvalArgv(treeRoot string) []string {
	return []string{"nix-instantiate", "--eval", "--strict", "--json", "--argstr", "tree", treeRoot, "--expr", nix.Definition()}
}

// Load loads the deployment definition of the operator tree at dir: deployment.nix
// (evaluated with nix-instantiate) or deployment.json; both, or neither, is refused.
func Load(ctx context.Context, dir string) (*Definition, error) {
	t, err := tree.Open(dir)
	if err != nil {
		return nil, &field.Error{Reason: err.Error()}
	}
	hasNix, hasJSON := exists(filepath.Join(t.Root, NixFile)), exists(filepath.Join(t.Root, JSONFile))
	switch {
	case hasNix && hasJSON:
		return nil, &field.Error{Source: t.Root, Reason: fmt.Sprintf("both %s and %s: keep one", NixFile, JSONFile)}
	case hasJSON:
		b, err := os.ReadFile(filepath.Join(t.Root, JSONFile))
		if err != nil {
			return nil, err
		}
		return Decode(t, JSONFile, b)
	case hasNix:
		b, err := evaluate(ctx, EvalArgv(t.Root))
		if err != nil {
			return nil, err
		}
		return Decode(t, NixFile, b)
	default:
		return nil, &field.Error{Source: t.Root, Reason: fmt.Sprintf("no %s or %s: not an operator tree", NixFile, JSONFile)}
	}
}

func evaluate(ctx context.Context, argv []string) ([]byte, error) {
	out, err := localcmd.Output(ctx, nil, argv...)
	var e *localcmd.Error
	if errors.As(err, &e) {
		return nil, &EvalError{Argv: argv, Err: e.Err, Stderr: e.Stderr}
	}
	return out, err
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}
