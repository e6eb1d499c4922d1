package effects

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/switchyard-nix/switchyard/localcmd"
)

// Source says where the toplevel comes from: exactly one of its fields is set.
type Source struct {
	Toplevel string // already built
	Drv      string // a derivation to realise
	Expr     string // a Nix file to evaluate (Attr selects an attribute)
	Attr     string
	// Evaluate gives the derivation (a method evaluates through its eval cache);
	// how says what it did, e.g. "evaluated" or "eval cache hit", for the log.
	Evaluate func(ctx context.Context) (drv, how string, err error)
}

// Validate checks exactly one source is given.
func (s Source) Validate() error {
	n := 0
	for _, v := range []string{s.Toplevel, s.Drv, s.Expr} {
		if v != "" {
			n++
		}
	}
	if s.Evaluate != nil {
		n++
	}
	if n != 1 {
		return fmt.Errorf("give exactly one of --toplevel, --drv, --expr")
	}
	if s.Attr != "" && s.Expr == "" {
		return fmt.Errorf("--attr goes with --expr")
	}
	return nil
}

// instantiateArgv evaluates a Nix file to a derivation path.
func instantiateArgv(expr, attr string) []string {
	argv := []string{"nix-instantiate", "--", expr}
	if attr != "" {
		argv = []string{"nix-instantiate", "--attr", attr, "--", expr}
	}
	return argv
}

// realiseArgv builds a derivation and prints its output paths.
func realiseArgv(drv string) []string { return []string{"nix-store", "--realise", "--", drv} }

// resolveToplevel builds or checks the toplevel on this machine.
func resolveToplevel(ctx context.Context, s Source) (string, error) {
	switch {
	case s.Toplevel != "":
		if !strings.HasPrefix(s.Toplevel, "/nix/store/") {
			return "", fmt.Errorf("toplevel %q is not a store path", s.Toplevel)
		}
		if _, err := os.Stat(s.Toplevel); err != nil {
			return "", fmt.Errorf("toplevel %s is not in the local store", s.Toplevel)
		}
		return s.Toplevel, nil
	case s.Drv != "":
		return realise(ctx, s.Drv)
	default:
		out, err := runLocal(ctx, instantiateArgv(s.Expr, s.Attr))
		if err != nil {
			return "", fmt.Errorf("evaluation failed: %w", err)
		}
		drvs := strings.Fields(out)
		if len(drvs) != 1 {
			return "", fmt.Errorf("evaluation gave %d derivations, want 1 (use --attr)", len(drvs))
		}
		return realise(ctx, drvs[0])
	}
}

func realise(ctx context.Context, drv string) (string, error) {
	out, err := runLocal(ctx, realiseArgv(drv))
	if err != nil {
		return "", fmt.Errorf("build failed: %w", err)
	}
	outs := strings.Fields(out)
	if len(outs) == 0 {
		return "", fmt.Errorf("build of %s printed no output path", drv)
	}
	return outs[0], nil
}

// builtOutput is the derivation's output when it is already in the local store:
// then nothing needs building. A derivation found built is remembered for the rest of
// the process (a valid store path stays valid within a run): the nodes of a fleet
// share their toplevel, so N bodies ask nix-store once instead of twice each, and
// the bodies asking at the same time wait for the first (issue 14 item 1). A
// derivation found not built is asked again.
func builtOutput(ctx context.Context, drv string) (string, bool) {
	built.mu.Lock()
	e, found := built.m[drv]
	if !found {
		e = &builtEntry{done: make(chan struct{})}
		built.m[drv] = e
	}
	built.mu.Unlock()
	if found {
		select {
		case <-e.done:
			if e.ok {
				return e.out, true
			}
			return queryBuilt(ctx, drv)
		case <-ctx.Done():
			return "", false
		}
	}
	e.out, e.ok = queryBuilt(ctx, drv)
	if !e.ok {
		built.mu.Lock()
		delete(built.m, drv)
		built.mu.Unlock()
	}
	close(e.done)
	return e.out, e.ok
}

// built holds the derivations builtOutput found built, by derivation path.
var built = struct {
	mu sync.Mutex
	m  map[string]*builtEntry
}{m: map[string]*builtEntry{}}

type builtEntry struct {
	done chan struct{} // closed when out and ok are set
	out  string
	ok   bool
}

// queryBuilt asks this machine's store for drv's output and whether it is valid; a
// variable for the unit tests.
var queryBuilt = func(ctx context.Context, drv string) (string, bool) {
	out, err := runLocal(ctx, []string{"nix-store", "--query", "--outputs", "--", drv})
	if err != nil {
		return "", false
	}
	outs := strings.Fields(out)
	if len(outs) != 1 {
		return "", false
	}
	if _, err := runLocal(ctx, []string{"nix-store", "--check-validity", "--", outs[0]}); err != nil {
		return "", false
	}
	return outs[0], true
}

// runLocal runs a local command; an error carries the last line of its stderr.
func runLocal(ctx context.Context, argv []string) (string, error) {
	out, err := localcmd.Output(ctx, nil, argv...)
	return string(out), err
}
