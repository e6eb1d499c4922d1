package incus

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/transports/incus/incustest"
)

// A remote of the Incus client configuration: the local daemon on a loopback
// HTTPS address, reached with a trusted client certificate and its pinned
// server certificate. One test function: the daemon's HTTPS address is global,
// so the subtests run one after another (never in parallel).
func TestRemote(t *testing.T) {
	bed := testbed.Require(t)
	node := bed.Node(t)
	toplevel := bed.Build(t, "healthy", "incus-remote")
	remote := incustest.NewRemote(t, "bedremote")
	t.Setenv("INCUS_CONF", remote.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	newRemote := func(t *testing.T, cfg Config) *Transport {
		t.Helper()
		tr, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}

	t.Run("run", func(t *testing.T) {
		tr := newRemote(t, Config{Instance: node.Name, Remote: remote.Name})
		if got, want := tr.Target(), "incus bedremote:default/"+node.Name; got != want {
			t.Errorf("Target %q, want %q", got, want)
		}
		var out, errOut bytes.Buffer
		code, err := tr.Run(ctx, effects.Command{Argv: []string{"sh", "-c", "cat; echo out; echo err >&2; exit 3"},
			Stdin: strings.NewReader("in\n"), Stdout: &out, Stderr: &errOut})
		if err != nil || code != 3 || out.String() != "in\nout\n" || errOut.String() != "err\n" {
			t.Errorf("Run: %d, %v, stdout %q, stderr %q", code, err, out.String(), errOut.String())
		}
		out.Reset()
		code, err = tr.Run(ctx, effects.Command{Argv: []string{"cat", "/proc/1/comm"}, Stdout: &out})
		if err != nil || code != 0 || out.String() != "systemd\n" {
			t.Errorf("cat /proc/1/comm: %d, %v, %q", code, err, out.String())
		}
		code, err = tr.Run(ctx, effects.Command{Argv: []string{"no-such-program"}})
		if err != nil || code != 127 {
			t.Errorf("a missing program: %d, %v", code, err)
		}
		// A big output over the websocket stream, byte for byte.
		out.Reset()
		code, err = tr.Run(ctx, effects.Command{Argv: []string{"head", "-c", "3000000", "/dev/zero"}, Stdout: &out})
		if err != nil || code != 0 || out.Len() != 3000000 {
			t.Errorf("3 MB of output: %d, %v, %d bytes", code, err, out.Len())
		}
	})

	t.Run("copy", func(t *testing.T) {
		tr := newRemote(t, Config{Instance: node.Name, Remote: "bedremote", Project: "default"})
		if err := tr.CopyClosure(ctx, []string{toplevel}); err != nil {
			t.Fatal(err)
		}
		if _, missing, sent, _ := tr.CopyCounts(); missing == 0 || sent != missing {
			t.Errorf("first copy: %d missing, %d sent", missing, sent)
		}
		if code, err := tr.Run(ctx, effects.Command{Argv: []string{"test", "-e", toplevel + "/bin/switch-to-configuration"}}); err != nil || code != 0 {
			t.Errorf("the toplevel on the node: %d, %v", code, err)
		}
	})

	t.Run("no such instance", func(t *testing.T) {
		tr := newRemote(t, Config{Instance: node.Name + "-gone", Remote: remote.Name})
		_, err := tr.Run(ctx, effects.Command{Argv: []string{"true"}})
		if !errors.Is(err, effects.ErrUnreachable) || !strings.Contains(err.Error(), "no such instance") {
			t.Errorf("a missing instance: %v", err)
		}
	})

	t.Run("wrong server certificate", func(t *testing.T) {
		other, _ := incustest.SelfSigned(t, "impostor")
		t.Setenv("INCUS_CONF", remote.WithServerCert(t, other))
		tr := newRemote(t, Config{Instance: node.Name, Remote: remote.Name})
		code, err := tr.Run(ctx, effects.Command{Argv: []string{"touch", "/root/touched"}})
		if !errors.Is(err, effects.ErrRefused) || errors.Is(err, effects.ErrUnreachable) || code != -1 {
			t.Fatalf("a server certificate that is not the pinned one: %d, %v; want ErrRefused", code, err)
		}
		if !strings.Contains(err.Error(), "pinned") || !strings.Contains(err.Error(), "refusing to touch the node") {
			t.Errorf("message %q", err)
		}
		if out, _ := node.Exec(ctx, "sh", "-c", "test -e /root/touched && echo touched || true"); out != "" {
			t.Errorf("the node was touched: %q", out)
		}
		if err := tr.CopyClosure(ctx, []string{toplevel}); !errors.Is(err, effects.ErrRefused) {
			t.Errorf("copy with a wrong pin: %v, want ErrRefused", err)
		}
	})

	t.Run("no pinned server certificate", func(t *testing.T) {
		// The system's roots do not vouch for the daemon's self-signed certificate.
		dir := t.TempDir()
		for _, name := range []string{"config.yml", "client.crt", "client.key"} {
			if err := os.Symlink(filepath.Join(remote.Dir, name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("INCUS_CONF", dir)
		tr := newRemote(t, Config{Instance: node.Name, Remote: remote.Name})
		_, err := tr.Run(ctx, effects.Command{Argv: []string{"true"}})
		if !errors.Is(err, effects.ErrRefused) || !strings.Contains(err.Error(), "servercerts/bedremote.crt") {
			t.Errorf("no pin, a self-signed server certificate: %v; want ErrRefused", err)
		}
	})

	t.Run("untrusted client certificate", func(t *testing.T) {
		dir := t.TempDir()
		crt, key := incustest.SelfSigned(t, "stranger")
		for name, data := range map[string][]byte{"client.crt": crt, "client.key": key} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range []string{"config.yml", "servercerts"} {
			if err := os.Symlink(filepath.Join(remote.Dir, name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		t.Setenv("INCUS_CONF", dir)
		tr := newRemote(t, Config{Instance: node.Name, Remote: remote.Name})
		_, err := tr.Run(ctx, effects.Command{Argv: []string{"true"}})
		if !errors.Is(err, effects.ErrUnreachable) || !strings.Contains(err.Error(), "does not trust this client's certificate") {
			t.Errorf("an untrusted client certificate: %v", err)
		}
	})

	t.Run("configuration errors", func(t *testing.T) {
		_, err := New(Config{Instance: node.Name, Remote: "nosuchremote"})
		if err == nil || !strings.Contains(err.Error(), `"nosuchremote"`) {
			t.Errorf("an unknown remote: %v", err)
		}
		_, err = New(Config{Instance: node.Name, Remote: "images"})
		if err == nil || !strings.Contains(err.Error(), `"images"`) || !strings.Contains(err.Error(), "simplestreams") {
			t.Errorf("an image server: %v", err)
		}
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(remote.Dir, "config.yml"), filepath.Join(dir, "config.yml")); err != nil {
			t.Fatal(err)
		}
		t.Setenv("INCUS_CONF", dir)
		_, err = New(Config{Instance: node.Name, Remote: remote.Name})
		if err == nil || !strings.Contains(err.Error(), `"bedremote"`) || strings.Contains(err.Error(), dir) ||
			strings.Contains(err.Error(), "client.key") || strings.Contains(err.Error(), "\n") {
			t.Errorf("no client certificate: %v", err)
		}
	})
}
