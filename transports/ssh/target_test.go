package ssh_test

import (
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/transports/ssh"
)

func TestParseTarget(t *testing.T) {
	cases := []struct {
		in   string
		user string
		host string
		port int
	}{
		{"web1", "", "web1", 0},
		{"web1.example.org:2222", "", "web1.example.org", 2222},
		{"deploy@web1", "deploy", "web1", 0},
		{"root@192.0.2.10:22", "root", "192.0.2.10", 22},
		{"[2001:db8::1]:2222", "", "2001:db8::1", 2222},
		{"admin@[2001:db8::1]", "admin", "2001:db8::1", 0},
		{"2001:db8::1", "", "2001:db8::1", 0},
		{"root@::1", "root", "::1", 0},
	}
	for _, c := range cases {
		user, host, port, err := ssh.ParseTarget(c.in)
		if err != nil {
			t.Errorf("ParseTarget(%q): %v", c.in, err)
			continue
		}
		if user != c.user || host != c.host || port != c.port {
			t.Errorf("ParseTarget(%q) = %q, %q, %d; want %q, %q, %d", c.in, user, host, port, c.user, c.host, c.port)
		}
	}
	for _, bad := range []string{
		"", "@host", "user@", "host:", "host:0", "host:65536", "host:22x", "host:+22",
		"[2001:db8::1", "[2001:db8::1]x", "[2001:db8::1]:", "[web1]:22", "a:b:c",
		"-oProxyCommand=x@host", "user@-oProxyCommand=x", "us er@host", "host name", "host;id",
	} {
		if u, h, p, err := ssh.ParseTarget(bad); err == nil {
			t.Errorf("ParseTarget(%q) = %q, %q, %d; want an error", bad, u, h, p)
		}
	}
}

func TestNewDefaults(t *testing.T) {
	tr, err := ssh.New(ssh.Config{Host: "192.0.2.10", KnownHostsFile: "/nonexistent/known_hosts"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got, want := tr.Target(), "ssh root@192.0.2.10:22"; got != want {
		t.Errorf("Target() = %q, want %q", got, want)
	}
	tr6, err := ssh.New(ssh.Config{User: "deploy", Host: "2001:db8::1", Port: 2222, KnownHostsFile: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr6.Target(), "ssh deploy@[2001:db8::1]:2222"; got != want {
		t.Errorf("Target() = %q, want %q", got, want)
	}
	for name, cfg := range map[string]ssh.Config{
		"no host":        {},
		"bad port":       {Host: "h", Port: 70000},
		"bad pinned key": {Host: "h", HostKey: "ssh-ed25519 notbase64!"},
		"missing key":    {Host: "h", KnownHostsFile: "/x", KeyFiles: []string{"/secret/place/id_missing"}},
	} {
		if _, err := ssh.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		} else if name == "missing key" && strings.Contains(err.Error(), "/secret/place") {
			t.Errorf("error names the key path: %v", err)
		}
	}
}
