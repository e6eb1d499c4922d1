package dnsserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/switchyard-nix/switchyard/dnsupdate"
	"github.com/switchyard-nix/switchyard/testbed"
)

// Kinds lists the servers Start can run.
func Kinds() []string { return []string{"bind9", "knot"} }

// Server is a running authoritative server for Zone, updatable with Key.
type Server struct {
	Kind    string        // "bind9" or "knot"
	Addr    string        // 127.0.0.1:port
	Zone    string        // FQDN
	KeyFile string        // BIND-format key file of Key (for dnsupdate and nsupdate)
	Key     dnsupdate.Key // the TSIG key allowed to update the zone
	Dir     string        // the server's directory (removed at cleanup)
	log     *syncBuffer   // the server's log (stderr)
	cmd     *exec.Cmd     // the server process
	done    chan struct{} // closed when the process has exited
}

// keySize is the secret size tsig-keygen uses for each algorithm: the HMAC's
// output size.
var keySize = map[string]int{"hmac-sha1": 20, "hmac-sha224": 28, "hmac-sha256": 32, "hmac-sha384": 48, "hmac-sha512": 64}

// Start starts a kind server ("bind9" or "knot") for zone with a key of the given
// algorithm ("hmac-sha256", ...), as an unprivileged foreground process on a
// free loopback port, and waits until it answers. It is stopped and its
// directory removed when t ends. Missing binaries skip the test, or fail it when
// SWITCHYARD_TESTBED=require.
func Start(t testing.TB, kind, zone, algorithm string) *Server {
	t.Helper()
	zone = dnsupdate.CanonicalName(zone)
	var bins []string
	switch kind {
	case "bind9":
		bins = []string{"/usr/sbin/named", "/usr/sbin/tsig-keygen", "/usr/bin/nsupdate"}
	case "knot":
		bins = []string{"/usr/sbin/knotd", "/usr/bin/nsupdate"}
	default:
		t.Fatalf("dnsserver: unknown kind %q (want one of %v)", kind, Kinds())
	}
	for _, b := range append(bins, "/usr/bin/setpriv") {
		if _, err := os.Stat(b); err != nil {
			testbed.Unavailable(t, kind+" DNS server", "testbed/setup.sh", err)
		}
	}
	if os.Geteuid() != 0 {
		testbed.Unavailable(t, kind+" DNS server", "testbed/setup.sh", fmt.Errorf("needs root to run it as nobody"))
	}
	if _, ok := keySize[algorithm]; !ok {
		t.Fatalf("dnsserver: algorithm %q not one of %v", algorithm, dnsupdate.Algorithms())
	}
	dir, err := os.MkdirTemp("", "switchyard-dns-"+kind+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// nobody must reach the directory to read the zone and write its journal.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{Kind: kind, Zone: zone, Dir: dir, KeyFile: filepath.Join(dir, "key.conf"), log: &syncBuffer{}}
	keyName := "switchyard-test-" + strings.ReplaceAll(strings.TrimSuffix(zone, "."), ".", "-") + "."
	// Loopback ports: pick a free one, and retry if another process took it
	// before the server bound it.
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		var args []string
		switch kind {
		case "bind9":
			args = s.configBind(t, keyName, algorithm, port)
		case "knot":
			args = s.configKnot(t, keyName, algorithm, port)
		}
		if err := s.start(t, args); err == nil {
			break
		} else if attempt == 4 {
			t.Fatalf("dnsserver: %s did not start: %v\n%s", kind, err, s.log.String())
		}
	}
	return s
}

// freePort is a loopback TCP port free right now (and its UDP twin, which the
// servers bind as well).
func freePort(t testing.TB) int {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", l.Addr().String())
		_ = l.Close()
		if err == nil {
			_ = u.Close()
			return port
		}
	}
}

// writeKey writes the BIND-format key file and reads it back as dnsupdate does.
func (s *Server) writeKey(t testing.TB, text string) {
	t.Helper()
	if err := os.WriteFile(s.KeyFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	k, err := dnsupdate.ReadKeyFile(s.KeyFile)
	if err != nil {
		t.Fatalf("dnsserver: %v", err)
	}
	s.Key = k
}

// zoneFile is the zone's initial content: SOA and NS.
func (s *Server) zoneFile() string {
	return fmt.Sprintf("$ORIGIN %s\n$TTL 300\n@ IN SOA ns1.%s hostmaster.%s 1 3600 600 86400 60\n@ IN NS ns1.%s\nns1 IN A 127.0.0.1\n",
		s.Zone, s.Zone, s.Zone, s.Zone)
}

func (s *Server) write(t testing.TB, name, text string) string {
	t.Helper()
	p := filepath.Join(s.Dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// configBind writes named's configuration (the key from tsig-keygen) and gives
// its command line.
func (s *Server) configBind(t testing.TB, keyName, algorithm string, port int) []string {
	t.Helper()
	if s.Key.Name == "" {
		out, err := exec.Command("/usr/sbin/tsig-keygen", "-a", algorithm, strings.TrimSuffix(keyName, ".")).Output()
		if err != nil {
			t.Fatalf("tsig-keygen: %v", err)
		}
		s.writeKey(t, string(out))
	}
	zf := s.write(t, "zone.db", s.zoneFile())
	conf := fmt.Sprintf(`include %q;
options {
	directory %q;
	pid-file %q;
	listen-on port %d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	allow-transfer { key %s; };
};
controls { };
logging {
	channel out { stderr; severity info; print-category yes; };
	channel updates { stderr; severity debug 8; print-category yes; };
	category default { out; };
	category update { updates; };
	category update-security { out; };
	category security { out; };
};
zone %q {
	type primary;
	file %q;
	update-policy { grant %s zonesub ANY; };
};
`, s.KeyFile, s.Dir, filepath.Join(s.Dir, "named.pid"), port, strings.TrimSuffix(keyName, "."), s.Zone, zf, strings.TrimSuffix(keyName, "."))
	cf := s.write(t, "named.conf", conf)
	// -f, not -g: -g ignores the logging statement. named logs every update
	// request it accepts ("update section prescan OK") at debug level 8
	// (Updates counts them): -d 8 with only the update category at that level.
	return []string{"/usr/sbin/named", "-f", "-d", "8", "-c", cf}
}

// configKnot writes knotd's configuration with a key written here (the same
// bytes in the knot and the BIND format) and gives its command line.
func (s *Server) configKnot(t testing.TB, keyName, algorithm string, port int) []string {
	t.Helper()
	if s.Key.Name == "" {
		b := make([]byte, keySize[algorithm])
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		secret := base64.StdEncoding.EncodeToString(b)
		s.writeKey(t, fmt.Sprintf("key %q {\n\talgorithm %s;\n\tsecret %q;\n};\n", strings.TrimSuffix(keyName, "."), algorithm, secret))
		s.write(t, "key.yaml", fmt.Sprintf("key:\n  - id: %s\n    algorithm: %s\n    secret: %s\n", keyName, algorithm, secret))
	}
	s.write(t, "zone.db", s.zoneFile())
	if err := os.MkdirAll(filepath.Join(s.Dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`server:
    rundir: %q
    listen: 127.0.0.1@%d
log:
  - target: stderr
    any: info
include: %q
database:
    storage: %q
acl:
  - id: update
    key: %s
    action: [update, transfer]
template:
  - id: default
    storage: %q
    file: zone.db
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: all
zone:
  - domain: %s
    acl: update
`, s.Dir, port, filepath.Join(s.Dir, "key.yaml"), filepath.Join(s.Dir, "db"), keyName, s.Dir, s.Zone)
	cf := s.write(t, "knot.conf", conf)
	return []string{"/usr/sbin/knotd", "-c", cf}
}

// start runs the server as nobody and waits until it answers a signed SOA query.
func (s *Server) start(t testing.TB, args []string) error {
	t.Helper()
	if out, err := exec.Command("chown", "-R", "nobody:nogroup", s.Dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	s.log.Reset()
	cmd := exec.Command("/usr/bin/setpriv", append([]string{"--reuid=nobody", "--regid=nogroup", "--clear-groups"}, args...)...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", s.Kind, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	c := &dnsupdate.Client{Server: s.Addr, Key: s.Key, Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("%s exited", s.Kind)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Check(ctx, s.Zone)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Cleanup(stop)
	return nil
}

// Log is what the server has logged so far.
func (s *Server) Log() string { return s.log.String() }

// updateLine matches the log line each server writes once per update request
// it has processed (approved or not).
var updateLine = map[string]*regexp.Regexp{
	// named: "... updating zone 'zone/IN': update section prescan OK"
	"bind9": regexp.MustCompile(`update section prescan OK`),
	// knotd: "[zone.] DDNS, processing 1 updates"
	"knot": regexp.MustCompile(`(?m)DDNS, processing \d+ updates`),
}

// Updates is how many update requests the server has processed so far,
// counted from its log.
func (s *Server) Updates(t testing.TB) int {
	t.Helper()
	// The log line may trail the answer by a moment.
	time.Sleep(100 * time.Millisecond)
	return len(updateLine[s.Kind].FindAllStringIndex(s.log.String(), -1))
}

// NSUpdate runs nsupdate -k KeyFile against the server with commands (a hand
// edit), e.g. "update add www.z. 60 A 192.0.2.9\n".
func (s *Server) NSUpdate(t testing.TB, commands string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(s.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/usr/bin/nsupdate", "-v", "-k", s.KeyFile)
	cmd.Stdin = strings.NewReader("server " + host + " " + port + "\nzone " + s.Zone + "\n" + commands + "send\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nsupdate: %v: %s", err, out)
	}
}

// Query reads the RRset name/typ with a plain (unsigned) TCP query: its TTL
// and records in canonical form, sorted; no records when it does not exist.
func (s *Server) Query(t testing.TB, name, typ string) (uint32, []string) {
	t.Helper()
	ttl, recs, err := s.QueryErr(name, typ)
	if err != nil {
		t.Fatal(err)
	}
	return ttl, recs
}

// QueryErr is Query returning its error (for polling goroutines).
func (s *Server) QueryErr(name, typ string) (uint32, []string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dnsupdate.CanonicalName(name), dns.StringToType[strings.ToUpper(typ)])
	m.RecursionDesired = false
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	r, _, err := c.Exchange(m, s.Addr)
	if err != nil {
		return 0, nil, fmt.Errorf("query %s %s: %w", name, typ, err)
	}
	if r.Rcode != dns.RcodeSuccess && r.Rcode != dns.RcodeNameError {
		return 0, nil, fmt.Errorf("query %s %s: %s", name, typ, dns.RcodeToString[r.Rcode])
	}
	var ttl uint32
	var recs []string
	for _, rr := range r.Answer {
		if rr.Header().Rrtype != dns.StringToType[strings.ToUpper(typ)] {
			continue
		}
		ttl = rr.Header().Ttl
		recs = append(recs, strings.TrimPrefix(rr.String(), rr.Header().String()))
	}
	slices.Sort(recs)
	return ttl, recs, nil
}

// syncBuffer is a log buffer the server writes while tests read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func (b *syncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b.Reset()
}
