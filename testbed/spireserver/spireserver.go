package spireserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/spire"
	"github.com/switchyard-nix/switchyard/testbed"
)

// EnvBinary names a spire-server binary to use instead of the test bed's.
const EnvBinary = "SWITCHYARD_SPIRE_SERVER"

// EnvBuild names the file testbed/test.sh writes when the spire-server it builds
// while the test-bed tier's first tests run is ready ("ok ...") or is not (anything
// else, with where its log is). Unset: the binary is there or it is not.
const EnvBuild = "SWITCHYARD_SPIRE_SERVER_BUILD"

// buildWait bounds the wait for that build: on an idle 2-core machine it takes a few
// minutes; the tests beside it slow it down.
const buildWait = 30 * time.Minute

// Version is the SPIRE version testbed/setup.sh builds (testbed/versions.sh).
var Version = testbed.Pin("spire")

// Binary is the spire-server to run: $SWITCHYARD_SPIRE_SERVER, else the one
// testbed/setup.sh builds into the test bed's cache.
func Binary() string {
	if b := os.Getenv(EnvBinary); b != "" {
		return b
	}
	return filepath.Join(testbed.CacheDir(), "spire-"+Version+"-min", "spire-server")
}

// Server is a running spire-server, stopped when its test ends.
type Server struct {
	Addr        string // "unix://<Socket>", as switchyard's spireServer setting takes it
	Socket      string // the API's unix socket
	Bin         string // the spire-server binary
	TrustDomain string
	Dir         string // the scratch directory: config, datastore, log
	Port        int    // the loopback TCP port of the agent API
}

// startTimeout bounds the wait for the server to answer its health check.
const startTimeout = 60 * time.Second

// Start starts a spire-server for trustDomain and stops it when t ends. A
// missing binary skips t, or fails it when SWITCHYARD_TESTBED=require.
func Start(t testing.TB, trustDomain string) *Server {
	t.Helper()
	waitForBuild(t)
	bin := Binary()
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		if err == nil {
			err = errors.New(bin + " is not executable")
		}
		testbed.Unavailable(t, "spire-server", "SWITCHYARD_TESTBED_OPERATOR=1 testbed/setup.sh", err)
	}
	// A unix socket's path is limited to about 100 bytes: t.TempDir() can be
	// longer than that, so the scratch directory is a short one of its own.
	dir, err := os.MkdirTemp("", "sy-spire-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{Socket: filepath.Join(dir, "api.sock"), Bin: bin, TrustDomain: trustDomain, Dir: dir}
	s.Addr = "unix://" + s.Socket
	// The probed port may be taken before the server binds it: then another.
	for attempt := 1; ; attempt++ {
		err := s.start(t)
		if err == nil {
			return s
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("spire-server: %v", err)
		}
	}
}

// waitForBuild waits until the build EnvBuild names has ended, and fails t if it
// failed or outlasts buildWait.
func waitForBuild(t testing.TB) {
	t.Helper()
	if path := os.Getenv(EnvBuild); path != "" {
		if err := awaitBuild(path, buildWait, 2*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitBuild polls every poll for the status file at path, until wait has passed:
// nil once it says "ok", an error with its text when it says anything else.
func awaitBuild(path string, wait, poll time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			if status := strings.TrimSpace(string(b)); !strings.HasPrefix(status, "ok") {
				return fmt.Errorf("spire-server's build: %s", status)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("spire-server's build has not ended after %v (%s: %v)", wait, EnvBuild, err)
		}
		time.Sleep(poll)
	}
}

// start runs the server on a fresh port and waits until it is healthy; the
// process is stopped when t ends (or at once when it does not get healthy).
func (s *Server) start(t testing.TB) error {
	port, err := testbed.FreePort()
	if err != nil {
		return err
	}
	s.Port = port
	data := filepath.Join(s.Dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	conf := filepath.Join(s.Dir, "server.conf")
	if err := os.WriteFile(conf, []byte(s.config(data)), 0o600); err != nil {
		return err
	}
	logPath := filepath.Join(s.Dir, fmt.Sprintf("server-%d.log", port))
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(s.Bin, "run", "-config", conf)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.Bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if err := s.waitHealthy(exited); err != nil {
		stop()
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("%w\n%s", err, tail(log, 3000))
	}
	t.Cleanup(stop)
	return nil
}

// config is the server's configuration: loopback only, everything in the
// scratch directory.
func (s *Server) config(data string) string {
	return fmt.Sprintf(`server {
	bind_address = "127.0.0.1"
	bind_port = "%d"
	socket_path = %q
	trust_domain = %q
	data_dir = %q
	log_level = "WARN"
}

plugins {
	DataStore "sql" {
		plugin_data {
			database_type = "sqlite3"
			connection_string = %q
		}
	}
	KeyManager "memory" {
		plugin_data {}
	}
	NodeAttestor "join_token" {
		plugin_data {}
	}
}
`, s.Port, s.Socket, s.TrustDomain, data, filepath.Join(data, "datastore.sqlite3"))
}

// waitHealthy runs `spire-server healthcheck` until it passes, the server
// exits or startTimeout has passed.
func (s *Server) waitHealthy(exited <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	var out []byte
	for {
		var err error
		out, err = exec.CommandContext(ctx, s.Bin, "healthcheck", "-socketPath", s.Socket).CombinedOutput()
		if err == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before it was healthy: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("not healthy within %s: %s", startTimeout, bytes.TrimSpace(out))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Client is a client of the server's API, closed when t ends.
func (s *Server) Client(t testing.TB) *spire.Client {
	t.Helper()
	c, err := spire.Dial(context.Background(), s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Entries lists every registration entry of the server (join-token agent IDs
// shown redacted).
func (s *Server) Entries(t testing.TB) []spire.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	es, err := s.Client(t).List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return es
}
