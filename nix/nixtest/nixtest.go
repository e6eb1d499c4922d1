// Package nixtest finds the Nix tools for tests: without them, or without a store they
// can write to (the flake check's build sandbox has the tools but no such store), a test
// skips, unless the test bed is required (SWITCHYARD_TESTBED=require, set by
// testbed/test.sh and CI), where it fails.
package nixtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	probeOnce sync.Once
	probeErr  error
)

// probe checks once that nix-instantiate can evaluate and write to the store.
func probe() error {
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "nix-instantiate", "--eval", "--expr",
			`builtins.toFile "switchyard-nixtest-probe" "usable"`).CombinedOutput()
		if err != nil {
			probeErr = fmt.Errorf("the Nix store is not usable: %v: %s", err, strings.TrimSpace(string(out)))
		}
	})
	return probeErr
}

// Require returns the path of each named tool (e.g. "nix-instantiate"), or ends the test.
func Require(t testing.TB, tools ...string) []string {
	t.Helper()
	out := make([]string, len(tools))
	for i, tool := range tools {
		p, err := exec.LookPath(tool)
		if err != nil {
			unavailable(t, fmt.Errorf("%s not on PATH (run testbed/setup.sh)", tool))
		}
		out[i] = p
	}
	if err := probe(); err != nil {
		unavailable(t, err)
	}
	return out
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("SWITCHYARD_TESTBED") == "require" {
		t.Fatalf("%v (the test bed requires it)", err)
	}
	t.Skip(err)
}
