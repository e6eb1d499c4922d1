package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// SPEC 6.9 (issue 29 item 5): an eval cache entry names what is built and deployed, so
// the cache is used only in a directory of the deployer's user that group and others
// cannot write. An entry planted in another user's directory, or in a group-writable
// one, is not deployed: the run says the cache is not used, evaluates, and the node
// runs the tree's system. Without XDG_CACHE_HOME and HOME the cache is off, never in
// the shared temporary directory.
func TestEvalCacheNotTrusted(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	node := bed.Node(t)
	tree, deployment := treeFor(t, "ssh", "healthy", map[string]*testbed.Node{"web1": node})
	good := t.TempDir()
	r := switchyard(t, []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + good}, "ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	want, _ := verdicts(t, r)["web1"]["toplevel"].(string)
	entries, _ := filepath.Glob(filepath.Join(good, "*"))
	if len(entries) != 1 || !regexp.MustCompile(`/[0-9a-f]{64}$`).MatchString(entries[0]) {
		t.Fatalf("the cache holds %v, want one entry", entries)
	}
	conf := filepath.Base(entries[0])

	// A derivation valid in the store that is not the tree's system.
	out, err := exec.Command("nix-instantiate", "--expr",
		`derivation { name = "planted"; system = builtins.currentSystem; builder = "/bin/sh"; args = [ "-c" "exit 1" ]; }`).Output()
	if err != nil {
		t.Fatalf("nix-instantiate: %v", err)
	}
	planted := strings.TrimSpace(string(out))
	for _, tc := range []struct{ name, why string }{
		{"a directory of another user", "belongs to uid 65534"},
		{"a group-writable directory", "mode 0775: writable by group or others"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, conf), []byte(planted+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(tc.why, "uid") {
			os.Chown(filepath.Join(dir, conf), 65534, 65534)
			os.Chown(dir, 65534, 65534)
		} else {
			os.Chmod(dir, 0o775)
		}
		r := switchyard(t, []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=" + dir}, "ssh", "apply", "--tree", tree, "--output", "json")
		v := verdicts(t, r)["web1"]
		if r.code != 0 || v["ok"] != true || v["toplevel"] != want {
			t.Errorf("%s: exit %d, verdict %v; want the tree's system %s\n%s", tc.name, r.code, v, want, strings.Join(logMsgs(r), "\n"))
		}
		if !said(r, "eval cache not used: "+dir+": the ") || !said(r, tc.why) || countLogs(r, "web1", "build: eval cache hit") != 0 {
			t.Errorf("%s: the run does not say the cache is not used:\n%s", tc.name, strings.Join(logMsgs(r), "\n"))
		}
		if got := node.Readlink(t, "/run/current-system"); got != want {
			t.Errorf("%s: the node runs %s", tc.name, got)
		}
	}

	tmp := t.TempDir()
	r = switchyard(t, []string{"DEPLOYMENT=" + deployment, "DEPLOY_EVAL_CACHE_DIR=", "XDG_CACHE_HOME=", "HOME=", "TMPDIR=" + tmp},
		"ssh", "apply", "--tree", tree, "--output", "json")
	wantCode(t, r, 0)
	if !said(r, "eval cache not used: neither XDG_CACHE_HOME nor HOME is set") {
		t.Errorf("without XDG_CACHE_HOME and HOME:\n%s", strings.Join(logMsgs(r), "\n"))
	}
	if _, err := os.Stat(filepath.Join(tmp, ".cache")); err == nil {
		t.Errorf("without XDG_CACHE_HOME and HOME the cache was made under the temporary directory")
	}
}

// said: a log event of the run holds s.
func said(r run, s string) bool {
	return strings.Contains(strings.Join(logMsgs(r), "\n"), s)
}
