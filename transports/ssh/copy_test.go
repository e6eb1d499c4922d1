package ssh

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCopyCommand(t *testing.T) {
	inv := copyInvocation{
		User: "root", Host: "127.0.0.1", Port: 2222,
		KnownHostsFile:    "/tmp/kh/known_hosts",
		HostKeyAlgorithms: []string{"ssh-ed25519"},
		KeyFiles:          []string{"/keys/id_a", "/keys/id_b"},
		ConnectTimeout:    1500 * time.Millisecond,
		Paths:             []string{"/nix/store/aaa-sys", "/nix/store/bbb-dep"},
	}
	argv, env, err := inv.command()
	if err != nil {
		t.Fatal(err)
	}
	wantArgv := []string{"nix-copy-closure", "--to", "root@127.0.0.1", "/nix/store/aaa-sys", "/nix/store/bbb-dep"}
	if !reflect.DeepEqual(argv, wantArgv) {
		t.Errorf("argv = %q, want %q", argv, wantArgv)
	}
	wantEnv := []string{"NIX_SSHOPTS=-p 2222 -o BatchMode=yes -o StrictHostKeyChecking=yes" +
		" -o UserKnownHostsFile=/tmp/kh/known_hosts -o GlobalKnownHostsFile=/dev/null" +
		" -o HostKeyAlgorithms=ssh-ed25519 -o ConnectTimeout=2 -i /keys/id_a -i /keys/id_b"}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Errorf("env = %q\nwant  %q", env, wantEnv)
	}

	inv.HostKeyAlgorithms = []string{"rsa-sha2-512", "rsa-sha2-256"}
	inv.KeyFiles, inv.ConnectTimeout = nil, 0
	_, env, err = inv.command()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(env[0], " -o HostKeyAlgorithms=rsa-sha2-512,rsa-sha2-256") {
		t.Errorf("env = %q", env)
	}
}

func TestCopyCommandRefuses(t *testing.T) {
	base := copyInvocation{User: "root", Host: "h", Port: 22, KnownHostsFile: "/kh",
		HostKeyAlgorithms: []string{"ssh-ed25519"}, Paths: []string{"/nix/store/x"}}
	for name, mutate := range map[string]func(*copyInvocation){
		"no paths":            func(c *copyInvocation) { c.Paths = nil },
		"option as path":      func(c *copyInvocation) { c.Paths = []string{"--from"} },
		"no known_hosts":      func(c *copyInvocation) { c.KnownHostsFile = "" },
		"no algorithms":       func(c *copyInvocation) { c.HostKeyAlgorithms = nil },
		"space in known path": func(c *copyInvocation) { c.KnownHostsFile = "/my dir/kh" },
		"space in key path":   func(c *copyInvocation) { c.KeyFiles = []string{"/secret dir/id"} },
	} {
		c := base
		mutate(&c)
		_, _, err := c.command()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), "secret dir") {
			t.Errorf("%s: error names the key path: %v", name, err)
		}
	}
}

func TestScrubAndLastLine(t *testing.T) {
	out := "copying 2 paths...\nWarning: Identity file /root/.ssh/id_x not accessible: No such file or directory.\n\n"
	got := lastLine(scrub(out, []string{"/root/.ssh/id_x"}, "/tmp/kh"))
	if want := "Warning: Identity file <key file> not accessible: No such file or directory."; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var tb tailBuffer
	for i := 0; i < 3*tailMax/10; i++ {
		tb.Write([]byte("0123456789"))
	}
	tb.Write([]byte("\nlast line\n"))
	if len(tb.String()) > tailMax || lastLine(tb.String()) != "last line" {
		t.Errorf("tail buffer: %d bytes, last line %q", len(tb.String()), lastLine(tb.String()))
	}
}
