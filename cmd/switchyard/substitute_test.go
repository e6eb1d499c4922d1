package main_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/testbed"
)

// nodeCache is a binary cache the test serves on the host's loopback, which one
// node reaches on its own loopback (an Incus proxy device bound in the instance)
// and trusts (its nix.conf: substituters, trusted-public-keys).
type nodeCache struct {
	dir, secretKey string
	srv            *http.Server
}

// nodeCachePort is where the node reaches the cache on its own loopback.
const nodeCachePort = 5080

// newNodeCache makes a signed, empty cache dir, serves it, and points node's Nix at it.
func newNodeCache(t *testing.T, node *testbed.Node) *nodeCache {
	t.Helper()
	keys := t.TempDir()
	c := &nodeCache{dir: t.TempDir(), secretKey: filepath.Join(keys, "secret")}
	pubFile := filepath.Join(keys, "public")
	hostCmd(t, "nix-store", "--generate-binary-cache-key", "switchyard-test-cache-1", c.secretKey, pubFile)
	pub, err := os.ReadFile(pubFile)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.srv = &http.Server{Handler: http.FileServer(http.Dir(c.dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	t.Cleanup(func() { _ = c.srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	hostCmd(t, "incus", "config", "device", "add", node.Name, "cache", "proxy", "bind=instance",
		"listen=tcp:127.0.0.1:"+strconv.Itoa(nodeCachePort), "connect=tcp:127.0.0.1:"+strconv.Itoa(port))
	node.MustExec(t, "sh", "-c", `printf '%s\n' "$@" >/etc/nix/nix.conf`, "sh",
		"sandbox = false", "build-users-group =",
		"substituters = http://127.0.0.1:"+strconv.Itoa(nodeCachePort),
		"trusted-public-keys = "+strings.TrimSpace(string(pub)))
	return c
}

// hold puts the closures of paths into the cache, signed.
func (c *nodeCache) hold(t *testing.T, paths ...string) {
	t.Helper()
	to := "file://" + c.dir + "?compression=none&secret-key=" + c.secretKey
	hostCmd(t, append([]string{"nix", "--extra-experimental-features", "nix-command", "copy", "--to", to}, paths...)...)
}

// down stops serving: the node's cache is unreachable from then on.
func (c *nodeCache) down() { _ = c.srv.Close() }

func hostCmd(t *testing.T, argv ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
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

// setNodeSubstitute bakes web1's substituteOnNode into the tree.
func setNodeSubstitute(t *testing.T, tree string, on bool) {
	t.Helper()
	defFile := filepath.Join(tree, "deployment.json")
	raw, err := os.ReadFile(defFile)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(raw, &def); err != nil {
		t.Fatal(err)
	}
	def["groups"].(map[string]any)["web"].(map[string]any)["nodes"].(map[string]any)["web1"].(map[string]any)["substituteOnNode"] = on
	raw, _ = json.Marshal(def)
	if err := os.WriteFile(defFile, raw, 0o644); err != nil {
		t.Fatal(err)
	}
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
		cache.hold(t, testbed.BuildClosure(t, "healthy", "mode-web1-"+gen))
	}
	apply := func(gen string, args ...string) pushLine {
		t.Helper()
		r := g.run(t, gen, "apply", args...)
		wantCode(t, r, 0)
		if v := r.verdict(t); v["ok"] != true {
			t.Fatalf("%s: verdict %v", gen, v)
		}
		p := push(t, r, "web1")
		t.Logf("%s %v: %s", gen, args, p.msg)
		return p
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
	cache.down()
	p = apply("sd")
	if p.missing == 0 || p.sent != p.missing || p.fromCaches != 0 {
		t.Errorf("cache down: %q; want every missing path sent by the deployer", p.msg)
	}
}
