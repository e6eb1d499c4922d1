package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeKey writes a fresh unencrypted ed25519 private key.
func writeKey(t *testing.T, dir, name string) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name, string(pem.EncodeToMemory(block)))
}

func jumpAddrs(tr *Transport) []string {
	var out []string
	for _, j := range tr.jumps {
		out = append(out, j.user+"@"+j.addr)
	}
	return out
}

func TestSSHConfigApplied(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SSH_AUTH_SOCK", "")
	key := writeKey(t, dir, "id_web")
	bastionKey := writeKey(t, dir, "id_bastion")
	conf := writeFile(t, dir, "config", `
# comments and unrelated options are fine
Host web1
  HostName 192.0.2.10
  Port 2222
  User deploy
  IdentityFile `+key+`
  IdentityFile `+dir+`/id_missing
  ProxyJump bastion,ops@hop2:2022

Host web*.example.org !web9.example.org
  HostName %h.internal
  User admin

Host bastion
  HostName 198.51.100.1
  Port 2200
  User jumper
  IdentityFile `+bastionKey+`

Host hop2
  HostName 198.51.100.2
  User ignored-because-the-spec-names-ops

Host direct
  HostName 192.0.2.20
  ProxyJump none

Host *
  Compression yes
`)
	base := Config{SSHConfigFile: conf, KnownHostsFile: "/nonexistent/known_hosts"}

	// The config fills what the target leaves open.
	cfg := base
	cfg.Host = "web1"
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Target(), "ssh deploy@192.0.2.10:2222"; got != want {
		t.Errorf("Target() = %q, want %q", got, want)
	}
	if len(tr.cfg.KeyFiles) != 1 || tr.cfg.KeyFiles[0] != key || len(tr.signers) != 1 {
		t.Errorf("key files %q (%d signers), want only the existing IdentityFile", tr.cfg.KeyFiles, len(tr.signers))
	}
	if got, want := strings.Join(jumpAddrs(tr), ","), "jumper@198.51.100.1:2200,ops@198.51.100.2:2022"; got != want {
		t.Errorf("jumps %q, want %q", got, want)
	}
	// The bastion gets the node's key and its own.
	if n := len(tr.jumps[0].signers); n != 2 {
		t.Errorf("bastion has %d signers, want 2", n)
	}
	if tr.jumps[0].knownHosts != "/nonexistent/known_hosts" {
		t.Errorf("jump host known_hosts %q", tr.jumps[0].knownHosts)
	}

	// Flags win over the config.
	flagKey := writeKey(t, dir, "id_flag")
	cfg = base
	cfg.Host, cfg.User, cfg.Port, cfg.KeyFiles, cfg.ProxyJump = "web1", "root", 22, []string{flagKey}, "none"
	tr, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Target(), "ssh root@192.0.2.10:22"; got != want {
		t.Errorf("flags: Target() = %q, want %q", got, want)
	}
	if len(tr.cfg.KeyFiles) != 1 || tr.cfg.KeyFiles[0] != flagKey || len(tr.jumps) != 0 {
		t.Errorf("flags: key files %q, jumps %q", tr.cfg.KeyFiles, jumpAddrs(tr))
	}

	// Patterns, negation and %h.
	for host, want := range map[string]string{
		"web3.example.org":  "ssh admin@web3.example.org.internal:22",
		"web9.example.org":  "ssh root@web9.example.org:22",
		"direct":            "ssh root@192.0.2.20:22",
		"192.0.2.99":        "ssh root@192.0.2.99:22",
		"other.example.org": "ssh root@other.example.org:22",
	} {
		cfg = base
		cfg.Host = host
		tr, err := New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		if tr.Target() != want {
			t.Errorf("%s: Target() = %q, want %q", host, tr.Target(), want)
		}
		if len(tr.jumps) != 0 {
			t.Errorf("%s: jumps %q", host, jumpAddrs(tr))
		}
	}

	// A jump host without a user is reached as the local user, as ssh(1) does.
	cfg = base
	cfg.Host, cfg.ProxyJump = "192.0.2.30", "[2001:db8::7]:2022"
	tr, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(jumpAddrs(tr), ","), localUser()+"@[2001:db8::7]:2022"; got != want {
		t.Errorf("jumps %q, want %q", got, want)
	}
}

func TestSSHConfigFirstHopJumps(t *testing.T) {
	dir := t.TempDir()
	conf := writeFile(t, dir, "config", `
Host inner
  HostName 10.0.0.5
  ProxyJump outer
Host outer
  HostName 203.0.113.1
  ProxyJump ssh://root@edge:2022
Host loop
  ProxyJump loop
`)
	tr, err := New(Config{Host: "node", ProxyJump: "a@inner", SSHConfigFile: conf, KnownHostsFile: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	u := localUser()
	if got, want := strings.Join(jumpAddrs(tr), ","), "root@edge:2022,"+u+"@203.0.113.1:22,a@10.0.0.5:22"; got != want {
		t.Errorf("jumps %q, want %q", got, want)
	}
	if _, err := New(Config{Host: "loop", SSHConfigFile: conf, KnownHostsFile: "/x"}); err == nil || !strings.Contains(err.Error(), "ProxyJump") {
		t.Errorf("a ProxyJump loop: %v", err)
	}
}

func TestSSHConfigFiles(t *testing.T) {
	dir := t.TempDir()
	// The default file may be missing.
	t.Setenv("HOME", dir)
	if _, err := New(Config{Host: "h", KnownHostsFile: "/x"}); err != nil {
		t.Errorf("missing ~/.ssh/config: %v", err)
	}
	// ~/.ssh/config is read by default.
	if err := os.MkdirAll(filepath.Join(dir, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ".ssh"), "config", "Host h\n  HostName 192.0.2.44\n  Port 2444\n")
	tr, err := New(Config{Host: "h", KnownHostsFile: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Target(), "ssh root@192.0.2.44:2444"; got != want {
		t.Errorf("Target() = %q, want %q", got, want)
	}
	// NoSSHConfig reads none.
	tr, err = New(Config{Host: "h", KnownHostsFile: "/x", SSHConfigFile: NoSSHConfig})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Target(), "ssh root@h:22"; got != want {
		t.Errorf("Target() = %q, want %q", got, want)
	}
	// The known_hosts default is ~/.ssh/known_hosts.
	tr, err = New(Config{Host: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, ".ssh", "known_hosts"); tr.cfg.KnownHostsFile != want {
		t.Errorf("known_hosts %q, want %q", tr.cfg.KnownHostsFile, want)
	}

	for name, content := range map[string]string{
		"bad port":          "Host h\n  Port many\n",
		"bad host name":     "Host h\n  HostName -oProxyCommand=x\n",
		"bad user":          "Host h\n  User -x\n",
		"unknown token":     "Host h\n  HostName %q.example\n",
		"bad proxy jump":    "Host h\n  ProxyJump a@b@:x\n",
		"unsupported match": "Match exec true\n  Port 1\n",
	} {
		conf := writeFile(t, dir, strings.ReplaceAll(name, " ", "-"), content)
		if _, err := New(Config{Host: "h", SSHConfigFile: conf, KnownHostsFile: "/x"}); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), conf) {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
	// A file given explicitly must exist.
	if _, err := New(Config{Host: "h", SSHConfigFile: filepath.Join(dir, "missing"), KnownHostsFile: "/x"}); err == nil {
		t.Error("a missing explicit ssh config accepted")
	}
}

func TestExpandTokens(t *testing.T) {
	for in, want := range map[string]string{
		"plain":        "plain",
		"%h.internal":  "web.internal",
		"100%%":        "100%",
		"%%h":          "%h",
		"/keys/%h/%r":  "/keys/web/root",
		"~/x":          "~/x",
		"%h%h":         "webweb",
		"a%hb%%c%rd":   "awebb%crootd",
		"":             "",
		"no%%tokens%%": "no%tokens%",
	} {
		got, err := expandTokens(in, map[byte]string{'h': "web", 'r': "root"})
		if err != nil || got != want {
			t.Errorf("expandTokens(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"%", "x%", "%z"} {
		if got, err := expandTokens(bad, map[byte]string{'h': "web"}); err == nil {
			t.Errorf("expandTokens(%q) = %q, want an error", bad, got)
		}
	}
}

// An IdentityFile the config cannot expand is an error that never names the path.
func TestSSHConfigIdentityFileErrorHidesThePath(t *testing.T) {
	dir := t.TempDir()
	conf := writeFile(t, dir, "config", "Host h\n  IdentityFile /secret/place/%Z/id\n")
	_, err := New(Config{Host: "h", SSHConfigFile: conf, KnownHostsFile: "/x"})
	if err == nil || strings.Contains(err.Error(), "/secret/place") || !strings.Contains(err.Error(), "IdentityFile") {
		t.Errorf("err = %v", err)
	}
}
