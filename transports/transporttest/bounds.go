package transporttest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
)

// BoundedFunc makes the transport under test for node with commandTimeout as its
// per-command deadline (the transport's Config.CommandTimeout).
type BoundedFunc func(t *testing.T, node *testbed.Node, commandTimeout time.Duration) effects.Transport

// Hostile answer sizes and bounds of the Bounds suite.
const (
	// hugeAnswer is what the hostile node's readlink writes: far more than the
	// deployer reads of one command (64 MiB, SPEC 6.9).
	hugeAnswer = 1_000_000_000
	// maxGrowth bounds how much the deployer's peak RSS may grow while it reads
	// that answer into a bytes.Buffer, as the deploy body does: the 64 MiB the cap
	// lets through, the 32 MiB the buffer's last doubling copied from, and the
	// Go collector's headroom over that live heap, which the garbage of the
	// transport's reads (the rest of the stream drained until the node's command
	// is killed) fills: measured 130 to 190 MiB. A deployer that read the whole
	// answer would hold at least its 954 MiB (measured: over 500 MiB for a 200 MB
	// answer); the answer is that large so that the cap's own cost is well below it.
	maxGrowth = 4 * 64 << 20
	// silentTimeout is the deadline the transport gets for the node that never
	// answers; silentMargin is how long past it Run may take to stop the command.
	silentTimeout = 2 * time.Second
	silentMargin  = 10 * time.Second
)

// Bounds runs SPEC 6.9's bounds on answers against one test-bed node made
// hostile: its readlink (first on PATH, /usr/local/bin) answers 200 MB, or never
// answers. The deployer must read at most 64 MiB of it, its memory must stay well
// below the answer's size, and a command that never ends must end at its deadline.
func Bounds(t *testing.T, newTransport BoundedFunc) {
	bed := testbed.Require(t)
	node := bed.Node(t)
	t.Run("answer-bounded", func(t *testing.T) {
		// A deadline the answer cannot reach first, however loaded the machine.
		tr := newTransport(t, node, 2*time.Minute)
		t.Cleanup(func() { tr.Close() })
		answerBounded(t, node, tr)
	})
	t.Run("silent-node-deadline", func(t *testing.T) {
		tr := newTransport(t, node, silentTimeout)
		t.Cleanup(func() { tr.Close() })
		silentNode(t, node, tr)
	})
}

// hostileReadlink makes the node's readlink run script (a /bin/sh script).
func hostileReadlink(t *testing.T, node *testbed.Node, script string) {
	t.Helper()
	node.MustExec(t, "sh", "-c", `printf '%s\n' '#!/bin/sh' "$1" >/usr/local/bin/readlink && chmod 755 /usr/local/bin/readlink`, "sh", script)
	t.Cleanup(func() { node.MustExec(t, "rm", "-f", "/usr/local/bin/readlink") })
}

// leftover lists the processes on the node whose command line holds pattern
// (a bracketed first letter keeps pgrep's own shell out of it).
func leftover(t *testing.T, node *testbed.Node, pattern string) string {
	t.Helper()
	return strings.TrimSpace(node.MustExec(t, "sh", "-c", "pgrep -af -- \"$1\" || true", "sh", pattern))
}

func answerBounded(t *testing.T, node *testbed.Node, tr effects.Transport) {
	hostileReadlink(t, node, "exec head -c "+strconv.Itoa(hugeAnswer)+" /dev/zero")
	// Connected first: the peak measured is the answer's, not the connection's.
	if _, err := tr.Run(timeout(t, time.Minute), effects.Command{Argv: []string{"true"}}); err != nil {
		t.Fatalf("true: %v", err)
	}

	base := resetPeakRSS(t)
	var out, errOut bytes.Buffer
	start := time.Now()
	code, err := tr.Run(timeout(t, 2*time.Minute), effects.Command{Argv: []string{"readlink", "-f", "/run/current-system"},
		Stdout: &out, Stderr: &errOut})
	took := time.Since(start)
	peak := peakRSS(t)
	t.Logf("readlink answering %d bytes: exit %d, err %v; %d bytes read in %v; peak RSS %d MiB over %d MiB before",
		hugeAnswer, code, err, out.Len(), took.Round(time.Millisecond), (peak-base)>>20, base>>20)

	if err == nil || !strings.Contains(err.Error(), "node answer exceeds 64 MiB") {
		t.Errorf("Run = %d, %v; want an error saying the node answer exceeds 64 MiB", code, err)
	}
	if out.Len() > 64<<20 {
		t.Errorf("%d bytes of the answer reached the caller, more than 64 MiB", out.Len())
	}
	if peak-base > maxGrowth {
		t.Errorf("the deployer's peak RSS grew by %d MiB reading the answer; want below %d MiB (the answer is %d MiB)",
			(peak-base)>>20, maxGrowth>>20, hugeAnswer>>20)
	}
	// The command was stopped on the node, not left writing into a closed stream.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left := leftover(t, node, "[h]ead -c "+strconv.Itoa(hugeAnswer))
		if left == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the command still runs on the node: %q", left)
			break
		}
	}
	// The transport still works after it.
	out.Reset()
	if code, err := tr.Run(timeout(t, time.Minute), effects.Command{Argv: []string{"echo", "ok"}, Stdout: &out}); err != nil || code != 0 || out.String() != "ok\n" {
		t.Errorf("echo ok after the cut: %d, %v, %q", code, err, out.String())
	}
}

func silentNode(t *testing.T, node *testbed.Node, tr effects.Transport) {
	hostileReadlink(t, node, "exec sleep 3600.25")
	// The test's own bound is far past the transport's deadline: a Run that ends
	// only with it was not bounded by the transport.
	ctx := timeout(t, 30*time.Second)
	start := time.Now()
	code, err := tr.Run(ctx, effects.Command{Argv: []string{"readlink", "-f", "/run/current-system"}, Stdout: &bytes.Buffer{}})
	took := time.Since(start)
	t.Logf("readlink that never answers: exit %d, err %v after %v", code, err, took.Round(time.Millisecond))
	switch {
	case err == nil:
		t.Errorf("Run = %d, nil; want an error", code)
	case ctx.Err() != nil:
		t.Errorf("Run ended only with the test's own bound (%v): %v; want it ended by the transport's deadline of %v", took.Round(time.Second), err, silentTimeout)
	case !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "deadline"):
		t.Errorf("Run: %v; want an error naming the command's deadline (context.DeadlineExceeded)", err)
	}
	if took > silentTimeout+silentMargin {
		t.Errorf("Run took %v; want within the deadline %v plus %v", took.Round(time.Millisecond), silentTimeout, silentMargin)
	}
	if took < silentTimeout {
		t.Errorf("Run ended after %v, before the deadline %v", took, silentTimeout)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left := leftover(t, node, "[s]leep 3600.25")
		if left == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the command still runs on the node after its deadline: %q", left)
			break
		}
	}
	// A command within the deadline still works.
	var out bytes.Buffer
	if code, err := tr.Run(timeout(t, time.Minute), effects.Command{Argv: []string{"echo", "ok"}, Stdout: &out}); err != nil || code != 0 || out.String() != "ok\n" {
		t.Errorf("echo ok after the deadline: %d, %v, %q", code, err, out.String())
	}
}

// resetPeakRSS collects garbage, resets the process's peak RSS (VmHWM) to its
// current RSS (proc(5): writing 5 to clear_refs) and returns that RSS in bytes.
func resetPeakRSS(t *testing.T) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS: %v", err)
	}
	return statusBytes(t, "VmRSS")
}

// peakRSS is the process's peak RSS (VmHWM) in bytes.
func peakRSS(t *testing.T) int64 { return statusBytes(t, "VmHWM") }

// statusBytes reads a "kB" field of /proc/self/status.
func statusBytes(t *testing.T, field string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", field, rest, err)
		}
		return kb << 10
	}
	t.Fatalf("/proc/self/status has no %s", field)
	return 0
}
