package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/switchyard-nix/switchyard/effects"
)

func newKey(t *testing.T) gossh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestAlgorithmsFor(t *testing.T) {
	got := algorithmsFor([]string{"ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256"})
	want := []string{"ssh-ed25519", "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestKnownKeyTypes(t *testing.T) {
	ed := newKey(t)
	file := filepath.Join(t.TempDir(), "known_hosts")
	lines := knownhosts.Line([]string{"[127.0.0.1]:2222"}, ed) + "\n" +
		knownhosts.Line([]string{"web1"}, newKey(t)) + "\n"
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := knownhosts.New(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := knownKeyTypes(db, "127.0.0.1:2222", nil); !reflect.DeepEqual(got, []string{"ssh-ed25519"}) {
		t.Errorf("127.0.0.1:2222: %q", got)
	}
	if got := knownKeyTypes(db, "web1:22", &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 22}); !reflect.DeepEqual(got, []string{"ssh-ed25519"}) {
		t.Errorf("web1:22: %q", got)
	}
	if got := knownKeyTypes(db, "127.0.0.1:22", nil); len(got) != 0 {
		t.Errorf("127.0.0.1:22 (another port): %q", got)
	}
}

// An unknown host is refused before any connection: no known_hosts entry, no
// known_hosts file, or a pinned key of another node.
func TestRefusedWithoutKnownKey(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// A server that speaks SSH's banner and host key of its own.
			go serveOneHandshake(c)
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	empty := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(empty, []byte(knownhosts.Line([]string{"elsewhere"}, newKey(t))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"not in known_hosts":  {Host: "127.0.0.1", Port: port, KnownHostsFile: empty},
		"no known_hosts file": {Host: "127.0.0.1", Port: port, KnownHostsFile: filepath.Join(t.TempDir(), "missing")},
		"another pinned key":  {Host: "127.0.0.1", Port: port, HostKey: string(gossh.MarshalAuthorizedKey(newKey(t)))},
	} {
		tr, err := New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = tr.Run(context.Background(), effects.Command{Argv: []string{"true"}})
		if !errors.Is(err, effects.ErrRefused) {
			t.Errorf("%s: err = %v, want ErrRefused", name, err)
		} else if !strings.Contains(err.Error(), "127.0.0.1:") {
			t.Errorf("%s: error does not name the host: %v", name, err)
		}
		// Sticky: a second Run is refused without dialling again.
		before := tr.dials.Load()
		if _, err := tr.Run(context.Background(), effects.Command{Argv: []string{"true"}}); !errors.Is(err, effects.ErrRefused) {
			t.Errorf("%s: second Run: %v", name, err)
		}
		if tr.dials.Load() != before {
			t.Errorf("%s: refused node dialled again", name)
		}
		tr.Close()
	}
}

// serveOneHandshake runs the server side of a handshake with a fresh host key and
// no way to authenticate.
func serveOneHandshake(c net.Conn) {
	defer c.Close()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := gossh.NewSignerFromKey(priv)
	cfg := &gossh.ServerConfig{PasswordCallback: func(gossh.ConnMetadata, []byte) (*gossh.Permissions, error) {
		return nil, errors.New("no")
	}}
	cfg.AddHostKey(signer)
	_, _, _, _ = gossh.NewServerConn(c, cfg)
}
