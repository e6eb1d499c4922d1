package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// Issue 34 item 5: `ssh exec --on SEL -- ARGV` runs the argv (never a shell string) on
// the selected nodes in parallel, output prefixed per node (text) or as exec events
// (JSON), exit code the worst of the nodes'.
func TestSSHExec(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	names := []string{"web1", "web2"}
	nodes, tree, env := fleetTree(t, bed, names, nil)
	exec := func(args ...string) run {
		return switchyard(t, env, append([]string{"ssh", "exec", "--tree", tree}, args...)...)
	}

	r := exec("--", "cat", "/etc/hostname")
	wantCode(t, r, 0)
	for _, name := range names {
		host := strings.TrimSpace(nodes[name].MustExec(t, "cat", "/etc/hostname"))
		if !strings.Contains(r.stdout, name+": "+host+"\n") {
			t.Errorf("stdout %q lacks %s's hostname %s, prefixed", r.stdout, name, host)
		}
	}

	// The argv reaches the node word for word: nothing a shell would expand is.
	word := `a b;$(id -u) 'c' "d" \e *`
	r = exec("--output", "json", "--on", "web2", "--", "printf", "%s|", word, "x")
	wantCode(t, r, 0)
	var got []map[string]any
	for _, e := range r.events {
		if e["kind"] == "exec" {
			got = append(got, e)
		}
	}
	if len(got) != 1 || got[0]["node"] != "web2" || got[0]["stdout"] != word+"|x|" || got[0]["exit_code"] != 0.0 {
		t.Errorf("exec events %v, want web2's one with stdout %q", got, word+"|x|")
	}

	// The worst exit code wins; each node's status is said.
	r = exec("--", "sh", "-c", `case "$(cat /etc/hostname)" in *web1*) exit 3;; *) exit 1;; esac`)
	if r.code != 3 && r.code != 1 {
		t.Fatalf("exit %d, want the worst node's", r.code)
	}
	codes := map[string]string{}
	for _, name := range names {
		host := strings.TrimSpace(nodes[name].MustExec(t, "cat", "/etc/hostname"))
		codes[name] = map[bool]string{true: "3", false: "1"}[strings.Contains(host, "web1")]
		if !strings.Contains(r.stderr, fmt.Sprintf("%s: [exit %s]", name, codes[name])) {
			t.Errorf("stderr %q lacks %s's exit %s", r.stderr, name, codes[name])
		}
	}

	// A node cannot drive the operator's terminal.
	r = exec("--on", "web1", "--", "printf", `\033[2Jdone\n`)
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "\033") || !strings.Contains(r.stdout, "web1: ?[2Jdone\n") {
		t.Errorf("stdout %q: want the escape shown as ?", r.stdout)
	}

	// No command: a usage error, its first line saying so. A selection of nothing:
	// refused in one line. Neither contacts a node.
	for _, args := range [][]string{{}, {"--"}} {
		r = exec(args...)
		wantCode(t, r, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.Contains(first, "give the command after --") {
			t.Errorf("%v: first line %q, want the missing command named", args, first)
		}
	}
	r = exec("--on", "db*", "--", "true")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "--on") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("refusal %q, want one line naming --on", r.stderr)
	}

	// A node the command cannot reach counts as 255 (ssh's own code), named.
	nodes["web2"].MustExec(t, "systemctl", "stop", "ssh.socket", "ssh.service")
	r = exec("--", "true")
	wantCode(t, r, 255)
	if !strings.Contains(r.stderr, "web2: exec: ") || strings.Contains(r.stderr, "web1: exec") {
		t.Errorf("stderr %q: want web2 named unreachable, web1 not", r.stderr)
	}
}
