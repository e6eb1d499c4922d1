package main_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/switchyard-nix/switchyard/plan/plantest"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/testbed/dnsserver"
)

// SPEC 6.9 / issue 29 item 2: a credential file that does not parse is refused naming
// the setting and the line, never any of its content, and no error of switchyard or
// of a tool it runs prints it. Each case stages a malformed file holding a unique
// marker (MARK below) and looks for the marker in stdout, stderr, every file of the
// state dir (the node plans' plan.json included) and the plan.

// leakCase is a malformed credential: content, where MARK stands for the run's
// marker, and the line its error must name (0: the run is not refused).
type leakCase struct {
	name    string
	content string
	line    int
}

// marker is a word no output holds by chance: letters and digits only, so it is
// also valid base64 and a valid key name.
func marker(t *testing.T) string {
	b := make([]byte, 8)
	rand.Read(b)
	return "SYLEAK" + hex.EncodeToString(b)
}

// stageCredential writes content as a credential file (0600, under os.TempDir(),
// which the test binary's SWITCHYARD_CREDENTIAL_DIRS holds).
func stageCredential(t *testing.T, content string) string {
	t.Helper()
	dir, err := os.MkdirTemp(os.TempDir(), "sy-cred-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "credential")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// noLeak fails when the marker, or the credential file's path, is in the run's
// output or in any file under the state dir.
func noLeak(t *testing.T, r run, mark, credFile, stateDir string) {
	t.Helper()
	for _, s := range []struct{ name, text string }{{"stdout", r.stdout}, {"stderr", r.stderr}} {
		if strings.Contains(s.text, mark) {
			t.Errorf("%s holds the credential's content:\n%s", s.name, s.text)
		}
		if strings.Contains(s.text, credFile) {
			t.Errorf("%s holds the credential's path:\n%s", s.name, s.text)
		}
	}
	plans := 0
	filepath.WalkDir(stateDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // symlinks (the provider's link to the binary) are not the run's files
		}
		if d.Name() == "plan.json" {
			plans++
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("state dir: %v", err)
			return nil
		}
		if bytes.Contains(b, []byte(mark)) {
			t.Errorf("state dir file %s holds the credential's content", strings.TrimPrefix(path, stateDir))
		}
		return nil
	})
	if plans == 0 {
		t.Logf("no plan.json under the state dir (the run stopped before planning)")
	}
}

var lineRE = regexp.MustCompile(`\bline ([0-9]+)\b`)

// refusedNaming checks that a refused run names setting and the line.
func refusedNaming(t *testing.T, r run, setting string, line int, wantExit int) {
	t.Helper()
	if r.code != wantExit {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, wantExit, r.stdout, r.stderr)
	}
	out := r.stderr + r.stdout
	if m := lineRE.FindStringIndex(r.stderr); m != nil {
		from := strings.LastIndexByte(r.stderr[:m[0]], '\n') + 1
		to := strings.IndexByte(r.stderr[m[0]:], '\n')
		if to < 0 {
			to = len(r.stderr) - m[0]
		}
		t.Logf("exit %d: %s", r.code, r.stderr[from:m[0]+to])
	}
	if !strings.Contains(out, setting) {
		t.Errorf("the refusal does not name %s:\n%s", setting, out)
	}
	m := lineRE.FindStringSubmatch(out)
	if m == nil || m[1] != strconv.Itoa(line) {
		t.Errorf("the refusal does not name line %d:\n%s", line, out)
	}
}

// pinnedHostKey is a host key to pin for a node nobody listens for.
func pinnedHostKey(t *testing.T) string {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k)))
}

// unreachableNode is a node of a tree that no run may reach: the key is refused
// before any connection.
func unreachableNode(t *testing.T) plantest.Node {
	return plantest.Node{Name: "web1", Host: "127.0.0.1", Port: 9, HostKey: pinnedHostKey(t)}
}

func TestCredentialLeakDNSTsigKeyFile(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	dns := dnsserver.Start(t, "bind9", operatorDomain+".", "hmac-sha256")
	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{
		Nodes:   []plantest.Node{{Name: "web1", Image: bed.Image}},
		Closure: "tenant-needs-identity",
		DNS:     operatorRecords,
		Methods: map[string]map[string]any{"tf-incus-operator": {"project": "switchyard-test-leak", "dnsServer": dns.Addr}},
	})
	for _, c := range []leakCase{
		{"a passwd line", "root:*:MARK:0:99999:7:::\n", 1},
		{"the secret alone", "\nMARK==\n", 2},
		{"the secret as a bare word", "key \"k\" {\n\talgorithm hmac-sha256;\n\tsecret MARK;\n};\n", 3},
		{"an unknown algorithm", "key \"k\" {\n\talgorithm MARK;\n\tsecret \"c2VjcmV0\";\n};\n", 2},
		{"an unknown statement", "key \"k\" {\n\tMARK \"x\";\n};\n", 2},
		{"a key name, no closing brace", "key \"MARK\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0\";\n", 3},
		{"a key name, no secret", "key \"MARK\" {\n\talgorithm hmac-sha256;\n};\n", 1},
		{"a key name that is no domain name", "key \"MARK..x\" {\n\talgorithm hmac-sha256;\n\tsecret \"c2VjcmV0\";\n};\n", 1},
		{"two keys", "key \"a\" { algorithm hmac-sha256; secret \"c2VjcmV0\"; };\nkey \"MARK\" { algorithm hmac-sha256; secret \"c2VjcmV0\"; };\n", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			mark := marker(t)
			file := stageCredential(t, strings.ReplaceAll(c.content, "MARK", mark))
			state := t.TempDir()
			r := switchyard(t, []string{`DEPLOYMENT={"deployment-method":{"tf-incus-operator":{"dnsTsigKeyFile":"` + file + `"}}}`},
				"tf-incus-operator", "refresh", "--tree", tree, "--state-dir", state, "--output", "json")
			noLeak(t, r, mark, file, state)
			refusedNaming(t, r, "dnsTsigKeyFile", c.line, 2)
		})
	}
}

func TestCredentialLeakPgConnStringFile(t *testing.T) {
	testbed.Require(t)
	needTofu(t)
	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{
		Nodes:   []plantest.Node{unreachableNode(t)},
		Methods: map[string]map[string]any{"tf": {"stateBackend": "pg"}},
	})
	for _, c := range []leakCase{
		{"a first word without =", "MARK host=/run/postgresql sslmode=disable\n", 1},
		{"a word on line 2", "host=/run/postgresql\nMARK\n", 2},
		{"a URL with a bad port", "postgres://user:MARK@127.0.0.1:port/postgres\n", 1},
		{"an unterminated quote", "host=/run/postgresql password='MARK\n", 1},
		{"an unknown sslmode", "host=/run/postgresql sslmode=MARK\n", 1},
		{"a URL of another scheme", "MARK://user@host/db\n", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			mark := marker(t)
			file := stageCredential(t, strings.ReplaceAll(c.content, "MARK", mark))
			state := t.TempDir()
			r := switchyard(t, []string{`DEPLOYMENT={"deployment-method":{"tf":{"pgConnStringFile":"` + file + `"}}}`},
				"tf", "refresh", "--tree", tree, "--state-dir", state, "--output", "json")
			noLeak(t, r, mark, file, state)
			refusedNaming(t, r, "pgConnStringFile", c.line, 2)
		})
	}
}

func TestCredentialLeakSSHKeyFile(t *testing.T) {
	testbed.Require(t)
	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{Nodes: []plantest.Node{unreachableNode(t)}})
	for _, c := range []leakCase{
		{"a PEM block of an unknown type", "-----BEGIN MARK PRIVATE KEY-----\nAAAA\n-----END MARK PRIVATE KEY-----\n", 1},
		{"no PEM block", "MARK\n", 1},
		{"text before the key", "\nMARK\n-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n", 2},
		{"a body that is no key", "-----BEGIN OPENSSH PRIVATE KEY-----\nMARK\n-----END OPENSSH PRIVATE KEY-----\n", 1},
		{"an RSA block that is no key", "-----BEGIN RSA PRIVATE KEY-----\nMARKAAAA\n-----END RSA PRIVATE KEY-----\n", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			mark := marker(t)
			file := stageCredential(t, strings.ReplaceAll(c.content, "MARK", mark))
			state := t.TempDir()
			r := switchyard(t, []string{`DEPLOYMENT={"deployment-method":{"ssh":{"sshKeyFile":"` + file + `"}}}`},
				"ssh", "verdict", "--tree", tree, "--state-dir", state, "--output", "json")
			noLeak(t, r, mark, file, state)
			refusedNaming(t, r, "sshKeyFile", c.line, 2)
		})
	}
}

func TestCredentialLeakIncusClientKeyFile(t *testing.T) {
	bed := testbed.Require(t)
	needTofu(t)
	// A client configuration with an HTTPS remote nobody listens on: the key is read,
	// and refused, before any connection.
	conf := t.TempDir()
	if err := os.WriteFile(filepath.Join(conf, "config.yml"), []byte("default-remote: local\nremotes:\n  yard:\n    addr: https://127.0.0.1:9\n    protocol: incus\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tree := plantest.WriteTree(t, t.TempDir(), plantest.Tree{
		Nodes:   []plantest.Node{{Name: "web1", Image: bed.Image}},
		Methods: map[string]map[string]any{"tf-incus": {"incusRemote": "yard"}},
	})
	for _, c := range []leakCase{
		{"no PEM block", "MARK\n", 1},
		{"text before a certificate", "\n\nMARK\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 3},
		{"a key block that is no key", "-----BEGIN MARK PRIVATE KEY-----\nAAAA\n-----END MARK PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", 1},
		{"a certificate that is none", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n-----BEGIN CERTIFICATE-----\nMARKAAAA\n-----END CERTIFICATE-----\n", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			mark := marker(t)
			file := stageCredential(t, strings.ReplaceAll(c.content, "MARK", mark))
			state := t.TempDir()
			r := switchyard(t, []string{"INCUS_CONF=" + conf, `DEPLOYMENT={"deployment-method":{"tf-incus":{"incusClientKeyFile":"` + file + `"}}}`},
				"tf-incus", "refresh", "--tree", tree, "--state-dir", state, "--output", "json")
			noLeak(t, r, mark, file, state)
			refusedNaming(t, r, "incusClientKeyFile", c.line, 2)
		})
	}
}
