package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// These tests run the real switchyard binary against test-bed nodes: real sshd,
// real systemd, real Nix store paths.

var binary string

func TestMain(m *testing.M) { os.Exit(testbed.RunWithSwitchyard(m, &binary)) }

// fastEnv shortens the verdict windows so a deploy takes seconds.
var fastEnv = []string{"DEPLOY_SETTLE_ATTEMPTS=5", "DEPLOY_CYCLE_INTERVAL=1", "DEPLOY_CYCLE_WINDOWS=3", "DEPLOY_WAIT_TIMEOUT=20"}

type run struct {
	code   int
	stdout string
	stderr string
	events []map[string]any
}

// verdict is the run's verdict event.
func (r run) verdict(t *testing.T) map[string]any {
	t.Helper()
	for _, e := range r.events {
		if e["kind"] == "verdict" {
			return e
		}
	}
	t.Fatalf("no verdict event; stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	return nil
}

func switchyard(t *testing.T, env []string, args ...string) run {
	t.Helper()
	return switchyardWatching(t, env, nil, args...)
}

// switchyardWatching is switchyard that, with onEvent not nil, hands it each line
// of stdout that is a JSON event as soon as it is printed, so a test can act on a
// node when a phase starts.
func switchyardWatching(t *testing.T, env []string, onEvent func(map[string]any), args ...string) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append(os.Environ(), fastEnv...), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stderr = &stderr
	var err error
	if onEvent == nil {
		cmd.Stdout = &stdout
		err = cmd.Run()
	} else {
		pipe, perr := cmd.StdoutPipe()
		if perr != nil {
			t.Fatal(perr)
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("run switchyard: %v", err)
		}
		sc := bufio.NewScanner(io.TeeReader(pipe, &stdout))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e map[string]any
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				onEvent(e)
			}
		}
		_, _ = io.Copy(&stdout, pipe) // what a line too long for the scanner left
		err = cmd.Wait()
	}
	r := run{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run switchyard: %v", err)
		}
		r.code = ee.ExitCode()
	}
	if contains(args, "json") {
		r.events = parseJSONLines(t, r.stdout)
	}
	return r
}

// parseJSONLines checks stdout holds JSON Lines only, ending with a summary.
func parseJSONLines(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var events []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("stdout line is not JSON: %q", sc.Text())
		}
		if _, ok := e["kind"]; !ok {
			t.Fatalf("event without kind: %q", sc.Text())
		}
		events = append(events, e)
	}
	if len(events) == 0 || events[len(events)-1]["kind"] != "summary" {
		t.Fatalf("stdout does not end with a summary event:\n%s", stdout)
	}
	return events
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deployArgs targets node over SSH with its pinned host key.
func deployArgs(node *testbed.Node, extra ...string) []string {
	return append([]string{"deploy", "--node", "web1",
		"--target", fmt.Sprintf("root@127.0.0.1:%d", node.SSHPort),
		"--known-hosts", node.KnownHosts, "--ssh-key", node.KeyFile}, extra...)
}

func strs(v any) []string {
	list, _ := v.([]any)
	out := []string{}
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func units(t *testing.T, v map[string]any, class string) any {
	t.Helper()
	u, ok := v["units"].(map[string]any)
	if !ok {
		t.Fatalf("verdict without units: %v", v)
	}
	return u[class]
}

func wantCode(t *testing.T, r run, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// phaseOrder lists the phases with a start event, in order.
func phaseOrder(r run) []string {
	var out []string
	for _, e := range r.events {
		if e["kind"] == "phase" && e["state"] == "start" {
			out = append(out, e["phase"].(string))
		}
	}
	return out
}

var _ = io.Discard
