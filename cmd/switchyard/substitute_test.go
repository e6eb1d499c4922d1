package main_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/testbed"
)

// nodeCachePort is where the node reaches the cache on its own loopback.
const nodeCachePort = 5080

// newNodeCache serves a signed, empty binary cache on the host's loopback, which
// node reaches on its own loopback (an Incus proxy device bound in the instance)
// and trusts (its nix.conf: substituters, trusted-public-keys).
func newNodeCache(t *testing.T, node *testbed.Node) *testbed.BinaryCache {
	t.Helper()
	c := testbed.NewBinaryCache(t)
	node.ReachHost(t, "cache", nodeCachePort, c.Port)
	node.MustExec(t, "sh", "-c", `printf '%s\n' "$@" >/etc/nix/nix.conf`, "sh",
		"sandbox = false", "build-users-group =",
		"substituters = http://127.0.0.1:"+strconv.Itoa(nodeCachePort),
		"trusted-public-keys = "+c.PublicKey)
	return c
}

// pushLine is a run's push line of node: the copy's counts.
type pushLine struct {
	msg                              string
	paths, missing, sent, fromCaches int
	bytes                            int64
	cachesFailed                     bool
}

var pushLinePattern = regexp.MustCompile(`^(\S+): push: (\d+) paths in the closure, (\d+) missing, (\d+) sent \((\d+) bytes\)(?:, (\d+) from the node's caches( \(they failed: .*\))?)?$`)

func push(t *testing.T, r run, node string) pushLine {
	t.Helper()
	for _, m := range logMsgs(r) {
		g := pushLinePattern.FindStringSubmatch(m)
		if g == nil || g[1] != node {
			continue
		}
		n := func(s string) int { i, _ := strconv.Atoi(s); return i }
		b, _ := strconv.ParseInt(g[5], 10, 64)
		return pushLine{msg: m, paths: n(g[2]), missing: n(g[3]), sent: n(g[4]), bytes: b, fromCaches: n(g[6]), cachesFailed: g[7] != ""}
	}
	t.Fatalf("no push line of %s in the events:\n%s", node, strings.Join(logMsgs(r), "\n"))
	return pushLine{}
}

// applyPushed applies generation gen, which must pass, and returns web1's push line
// as find reads it from the run.
func (g *genBed) applyPushed(t *testing.T, find func(*testing.T, run, string) pushLine, gen string, args ...string) pushLine {
	t.Helper()
	r := g.run(t, gen, "apply", args...)
	wantCode(t, r, 0)
	if v := r.verdict(t); v["ok"] != true {
		t.Fatalf("%s: verdict %v", gen, v)
	}
	p := find(t, r, "web1")
	t.Logf("%s %v: %s", gen, args, p.msg)
	return p
}

// setNodeSubstitute bakes web1's substituteOnNode into the tree.
func setNodeSubstitute(t *testing.T, tree string, on bool) {
	t.Helper()
	editDeployment(t, tree, func(def map[string]any) {
		def["groups"].(map[string]any)["web"].(map[string]any)["nodes"].(map[string]any)["web1"].(map[string]any)["substituteOnNode"] = on
	})
}

// Issue 34 item 1: substitutes on the node. By default the node first fetches from
// the binary caches of its own Nix configuration what they hold, and the deployer
// streams only the rest; the push line says how many came from the caches.
// --no-substitute and the node's substituteOnNode = false stream everything; a
// cache that is down costs the copy nothing but the node's attempt.
func TestSSHSubstituteOnNode(t *testing.T) {
	bed := testbed.Require(t)
	t.Parallel()
	g := newGenBed(t, bed)
	cache := newNodeCache(t, g.node)
	// Each generation's closure in the node's cache: its toplevel (the payload
	// they share is there after the first).
	for _, gen := range []string{"sa", "sb", "sc", "sd"} {
		cache.Hold(t, testbed.BuildClosure(t, "healthy", "mode-web1-"+gen))
	}
	apply := func(gen string, args ...string) pushLine {
		t.Helper()
		return g.applyPushed(t, push, gen, args...)
	}

	// (a) Everything the node lacks is in its cache: no path, no NAR byte, from
	// the deployer.
	p := apply("sa")
	if p.missing == 0 || p.fromCaches != p.missing || p.sent != 0 || p.bytes > 4096 || p.cachesFailed {
		t.Errorf("cache up: %q; want every missing path from the node's caches, none sent, only the protocol's bytes", p.msg)
	}

	// (c) --no-substitute streams every missing path, the cache up or not.
	p = apply("sb", "--no-substitute")
	if p.missing == 0 || p.sent != p.missing || p.fromCaches != 0 {
		t.Errorf("--no-substitute: %q; want every missing path sent, none from the caches", p.msg)
	}
	// ... as does the node's own substituteOnNode = false.
	setNodeSubstitute(t, g.tree, false)
	p = apply("sc")
	if p.missing == 0 || p.sent != p.missing || p.fromCaches != 0 {
		t.Errorf("substituteOnNode = false: %q; want every missing path sent, none from the caches", p.msg)
	}
	setNodeSubstitute(t, g.tree, true)

	// (b) The cache down: the copy completes from the deployer.
	cache.Down()
	p = apply("sd")
	if p.missing == 0 || p.sent != p.missing || p.fromCaches != 0 {
		t.Errorf("cache down: %q; want every missing path sent by the deployer", p.msg)
	}
}
