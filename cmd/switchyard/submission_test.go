package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 29's reproduction: plan.json holds the submission's strings verbatim and is
// written before any node is contacted, so a submission that points knownHostsFile at
// it and plants a known_hosts line in an application setting would make switchyard
// accept whatever key the host shows. The tree vouches for the node with a known_hosts
// file that does not hold the key the node's sshd has (the "impostor"): the
// submission is refused (exit 2, before any connection), and nothing on the node
// changes. The tree's own known_hosts still refuses the impostor.
func TestSubmissionCannotVouchForAHost(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	proxy := testbed.Cut(t, node)
	dir := t.TempDir()
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%d %s\n", proxy.Port, testbed.StrangerHostKey(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	tree := plantest.WriteTree(t, filepath.Join(dir, "tree"), plantest.Tree{
		Nodes:   []plantest.Node{{Name: "web1", Host: "127.0.0.1", Port: proxy.Port}},
		Methods: map[string]map[string]any{"ssh": {"knownHostsFile": known}},
	})
	line := fmt.Sprintf("x,[127.0.0.1]:%d,y %s ", proxy.Port, strings.TrimSpace(node.HostKey))
	for _, tc := range []struct{ name, branch, at string }{
		{"knownHostsFile at the node's plan.json", fmt.Sprintf(`"knownHostsFile":%q,"sshKeyFile":%q,"applications":{"hello":{"enable":true,"settings":{"greeting":%q}}}`,
			filepath.Join(tree, ".switchyard", "nodes", "web1", "plan.json"), node.KeyFile, line),
			"deployment-method.ssh.knownHostsFile: set by the tree only"},
		{"a credential outside every credential directory", `"sshKeyFile":"/etc/shadow"`,
			"deployment-method.ssh.sshKeyFile: credential file refused: not under a credential directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deployment := `{"deployment-method":{"ssh":{` + tc.branch + `}}}`
			r := switchyard(t, []string{"DEPLOYMENT=" + deployment, "SWITCHYARD_CREDENTIAL_DIRS=" + filepath.Dir(node.KeyFile)}, "ssh", "apply", "--tree", tree)
			wantCode(t, r, 2)
			if !strings.Contains(r.stderr, tc.at) {
				t.Errorf("stderr does not name %q:\n%s", tc.at, r.stderr)
			}
			if strings.Contains(r.stderr+r.stdout, "/etc/shadow") {
				t.Errorf("the refusal prints the credential path:\n%s", r.stderr)
			}
		})
	}
	if n := proxy.Accepted(); n != 0 {
		t.Errorf("the refused runs opened %d connections to the node", n)
	}
	if _, err := node.Exec(t.Context(), "test", "-e", "/run/current-system"); err == nil {
		t.Error("the node runs a deployed system after refused runs")
	}
	// The tree's known_hosts, which a submission cannot replace, refuses the node's key.
	deployment := fmt.Sprintf(`{"deployment-method":{"ssh":{"sshKeyFile":%q}}}`, node.KeyFile)
	r := switchyard(t, []string{"DEPLOYMENT=" + deployment}, "ssh", "apply", "--tree", tree)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "host key") {
		t.Errorf("the tree's known_hosts let the impostor in: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
