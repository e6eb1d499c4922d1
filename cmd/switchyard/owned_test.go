package main_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ownedFailure is the error log line of the owned phase, "" when there is none.
func ownedFailure(r run) string {
	for _, e := range r.events {
		if msg, _ := e["msg"].(string); e["kind"] == "log" && e["level"] == "error" && strings.HasPrefix(msg, "web1: owned: ") {
			return msg
		}
	}
	return ""
}

// Issue 11 item 1: the owned-unit list fails closed. When the unit directory cannot be
// listed, the node stops with exit 3 naming the owned phase, instead of reading "owns
// nothing" and setting its failed unit aside; a configuration without a unit directory
// owns no units and passes.
func TestDeployOwnedUnitsFailClosed(t *testing.T) {
	t.Run("symlink loop in the unit directory", func(t *testing.T) {
		node, top := setup(t, "owned-unreadable")
		r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
		wantCode(t, r, 3)
		if msg := ownedFailure(r); !strings.Contains(msg, "loop.service") {
			t.Errorf("owned phase error %q does not name the unreadable entry", msg)
		}
	})
	t.Run("find missing on the node", func(t *testing.T) {
		node, top := setup(t, "owned-unreadable")
		node.MustExec(t, "mv", "/usr/bin/find", "/usr/bin/find.away")
		r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
		wantCode(t, r, 3)
		if msg := ownedFailure(r); msg == "" {
			t.Errorf("no error of the owned phase; events: %v", r.events)
		}
		if got := strs(units(t, r.verdict(t), "set_aside")); len(got) != 0 {
			t.Errorf("units set aside although the owned units were never read: %v", got)
		}
	})
	t.Run("no unit directory", func(t *testing.T) {
		node, top := setup(t, "owned-no-unit-dir")
		r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
		wantCode(t, r, 0)
		if v := r.verdict(t); v["ok"] != true {
			t.Errorf("verdict %v", v)
		}
	})
}

// Issue 11 item 13: mounts from the configuration's etc/fstab are owned units: a data
// mount that fails fails the deploy, named by its unit; the healthy mount next to it
// is up.
func TestDeployFstabMountsAreOwned(t *testing.T) {
	node, top := setup(t, "fstab-mounts")
	r := switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...)
	wantCode(t, r, 1)
	v := r.verdict(t)
	if got := strs(units(t, v, "failed")); strings.Join(got, ",") != "mnt-data.mount" {
		t.Errorf("failed = %v, want [mnt-data.mount]", got)
	}
	if got := strs(units(t, v, "set_aside")); contains(got, "mnt-data.mount") {
		t.Errorf("the configuration's mount was set aside: %v", got)
	}
	if !strings.Contains(strings.Join(strs(v["reasons"]), ";"), "failed unit: mnt-data.mount") {
		t.Errorf("reasons %v", v["reasons"])
	}
	if st := node.UnitProperties(t, "mnt-scratch.mount", "ActiveState")["ActiveState"]; st != "active" {
		t.Errorf("mnt-scratch.mount is %s, want active", st)
	}

	// The verdict-only pass reads the running system's fstab: the same judgement.
	r = switchyard(t, []string{"DEPLOY_VERDICT_ONLY=1"}, deployArgs(node, "--output", "json")...)
	wantCode(t, r, 1)
	if got := strs(units(t, r.verdict(t), "failed")); strings.Join(got, ",") != "mnt-data.mount" {
		t.Errorf("verdict-only: failed = %v, want [mnt-data.mount]", got)
	}
}

// Issue 11 item 14: a chain member that is a plain oneshot (no RemainAfterExit=) ran
// and exited successfully since the activation: it counts as done, and the gate passes.
func TestVerdictOnlyChainOfOneshots(t *testing.T) {
	node, top := setup(t, "chain-oneshot")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...), 0)
	if st := node.UnitProperties(t, "prepare-secrets.service", "ActiveState")["ActiveState"]; st != "inactive" {
		t.Fatalf("the oneshot chain head is %s, want inactive (ran and exited)", st)
	}
	r := switchyard(t, []string{"DEPLOY_VERDICT_ONLY=1", "DEPLOY_CHAIN_STALL=3", "DEPLOY_CHAIN_TIMEOUT=30"}, deployArgs(node, "--output", "json")...)
	wantCode(t, r, 0)
	for _, e := range r.events {
		if e["kind"] == "phase" && e["phase"] == "chain" && e["state"] != "start" && e["state"] != "done" {
			t.Errorf("chain phase %v", e)
		}
	}
}

// Issue 11 item 6: the chain gate that loses the node (its SSH forward is cut while the
// gate waits) gives up after a few unreadable samples and reports the node
// unreachable: reachable false, exit 3.
func TestVerdictOnlyChainUnreachable(t *testing.T) {
	node, top := setup(t, "secret-chain-stalled")
	wantCode(t, switchyard(t, nil, deployArgs(node, "--toplevel", top, "--output", "json")...), 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, deployArgs(node, "--output", "json")...)
	cmd.Env = append(append(os.Environ(), fastEnv...), "DEPLOY_VERDICT_ONLY=1", "DEPLOY_CHAIN_STALL=300", "DEPLOY_CHAIN_TIMEOUT=300")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	cut := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if !cut && strings.Contains(sc.Text(), "chain: waiting for") {
			cut = true
			if b, err := exec.CommandContext(ctx, "incus", "config", "device", "remove", node.Name, "ssh").CombinedOutput(); err != nil {
				t.Fatalf("cutting the SSH forward: %v: %s", err, b)
			}
		}
	}
	r := run{stdout: out.String(), stderr: stderr.String()}
	if err := cmd.Wait(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		r.code = ee.ExitCode()
	}
	if !cut {
		t.Fatalf("the chain gate never waited:\n%s", r.stdout)
	}
	r.events = parseJSONLines(t, r.stdout)
	wantCode(t, r, 3)
	v := r.verdict(t)
	if v["reachable"] != false || v["ok"] != false {
		t.Errorf("verdict: reachable=%v ok=%v, want false, false", v["reachable"], v["ok"])
	}
	if reasons := strings.Join(strs(v["reasons"]), ";"); !strings.Contains(reasons, "node unreachable while waiting for the chain") {
		t.Errorf("reasons %q", reasons)
	}
}
