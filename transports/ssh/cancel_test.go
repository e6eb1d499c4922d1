package ssh_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/ssh"
)

// A cancelled Run of a user with passwordless sudo ends the command on the node,
// children included: the kill goes through sudo as the command did (issue 15
// item 3; the conformance suite's run/cancel covers root).
func TestNodeCancelUnderSudo(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	addUser(t, node, "deploy", "NOPASSWD")
	tr := nodeTransport(t, node, func(c *ssh.Config) { c.User = "deploy" })

	const marker = "118.5" // the sleeps' argument, to find them on the node
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := tr.Run(ctx, effects.Command{Argv: []string{"sh", "-c", "sleep " + marker + " & sleep " + marker + "; wait"}})
		done <- err
	}()
	leftovers := func() string {
		return strings.TrimSpace(node.MustExec(t, "sh", "-c", "pgrep -af '[s]leep "+marker+"' || true"))
	}
	for deadline := time.Now().Add(30 * time.Second); strings.Count(leftovers(), "\n") < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start within 30 s: %q", leftovers())
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "may still run") {
			t.Errorf("Run after the cancel: %v; want context.Canceled, the command stopped", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15 s of the cancel")
	}
	for deadline := time.Now().Add(6 * time.Second); leftovers() != ""; time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled command still runs on the node: %q", leftovers())
		}
	}
	// The transport still works, and a cancel leaves no output of the pid report.
	if code, out := run(t, tr, effects.Command{Argv: []string{"id", "-u"}}); code != 0 || out != "0\n" {
		t.Errorf("id -u after the cancel: exit %d, %q", code, out)
	}
}
