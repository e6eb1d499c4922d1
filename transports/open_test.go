package transports

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/switchyard-nix/switchyard/transports/incus"
	"github.com/switchyard-nix/switchyard/transports/ssh"
)

// Open builds each kind from its own settings without touching a node, and a
// failed build is a nil transport (issue 13: one way to build a transport).
func TestOpen(t *testing.T) {
	tr, err := Open(Spec{Kind: SSH, SSH: ssh.Config{User: "root", Host: "127.0.0.1", Port: 1,
		HostKey:        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
		KnownHostsFile: filepath.Join(t.TempDir(), "known_hosts")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Target(); got != "ssh root@127.0.0.1:1" {
		t.Errorf("ssh target %q", got)
	}
	tr.Close()

	tr, err = Open(Spec{Kind: Incus, Incus: incus.Config{Instance: "n1", Project: "p",
		Socket: filepath.Join(t.TempDir(), "unix.socket")}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Target(); got != "incus p/n1" {
		t.Errorf("incus target %q", got)
	}
	tr.Close()

	if tr, err := Open(Spec{Kind: Incus, Incus: incus.Config{Instance: "not/valid"}}); err == nil || tr != nil {
		t.Errorf("a bad instance name: transport %v, err %v", tr, err)
	}
	if tr, err := Open(Spec{Kind: Shell}); err == nil || tr != nil {
		t.Errorf("shell without hooks: transport %v, err %v", tr, err)
	}
	if tr, err := Open(Spec{Kind: "telnet"}); !errors.Is(err, ErrUnknownKind) || tr != nil {
		t.Errorf("unknown kind: transport %v, err %v", tr, err)
	}
	if tr, err := Open(Spec{}); !errors.Is(err, ErrUnknownKind) || tr != nil {
		t.Errorf("no kind: transport %v, err %v", tr, err)
	}
}

// ParseTarget reads deploy's --target for each kind, and names the node by it.
func TestParseTarget(t *testing.T) {
	for _, c := range []struct {
		kind   Kind
		target string
		want   Spec
		name   string
		err    bool
	}{
		{SSH, "admin@127.0.0.1:2222", Spec{Kind: SSH, SSH: ssh.Config{User: "admin", Host: "127.0.0.1", Port: 2222}}, "127.0.0.1", false},
		{Incus, "yard:web1", Spec{Kind: Incus, Incus: incus.Config{Remote: "yard", Instance: "web1"}}, "web1", false},
		{Incus, "web1", Spec{Kind: Incus, Incus: incus.Config{Instance: "web1"}}, "web1", false},
		{Shell, "", Spec{Kind: Shell}, "node", false},
		{SSH, "", Spec{}, "", true},
		{"telnet", "h", Spec{}, "", true},
	} {
		spec, name, err := ParseTarget(c.kind, c.target)
		if c.err {
			if err == nil {
				t.Errorf("%s %q: no error", c.kind, c.target)
			}
			continue
		}
		if err != nil || name != c.name || spec.Kind != c.want.Kind || spec.SSH.User != c.want.SSH.User ||
			spec.SSH.Host != c.want.SSH.Host || spec.SSH.Port != c.want.SSH.Port || spec.Incus != c.want.Incus {
			t.Errorf("%s %q: %+v %q %v, want %+v %q", c.kind, c.target, spec, name, err, c.want, c.name)
		}
	}
	if _, _, err := ParseTarget("telnet", "h"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("unknown kind: %v", err)
	}
}
