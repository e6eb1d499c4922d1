package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"github.com/switchyard-nix/switchyard/dnsupdate"
	"github.com/switchyard-nix/switchyard/provider/contract"
	"github.com/switchyard-nix/switchyard/testbed"
	"github.com/switchyard-nix/switchyard/testbed/dnsserver"
)

// reattachProvider serves the provider from this test process, as OpenTofu's
// TF_REATTACH_PROVIDERS expects it (the provider then runs with this process's
// environment). It is stopped when t ends.
func reattachProvider(t *testing.T) string {
	t.Helper()
	// In debug mode the SDK logs every request at trace level to stderr.
	for _, k := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_PROVIDER"} {
		t.Setenv(k, "OFF")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfgCh := make(chan *plugin.ReattachConfig, 1)
	closeCh := make(chan struct{})
	serveErr := make(chan error, 1)
	go func() {
		serveErr <- tf6server.Serve(Address, func() tfprotov6.ProviderServer {
			srv, err := providerserver.NewProtocol6WithError(New())()
			if err != nil {
				panic(err)
			}
			return srv
		}, tf6server.WithDebug(ctx, cfgCh, closeCh), tf6server.WithoutLogStderrOverride())
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-closeCh:
		case <-time.After(10 * time.Second):
		}
	})
	var cfg *plugin.ReattachConfig
	select {
	case cfg = <-cfgCh:
	case err := <-serveErr:
		t.Fatalf("serve the provider: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the provider did not start")
	}
	type addr struct{ Network, String string }
	b, err := json.Marshal(map[string]any{Address: map[string]any{
		"Protocol": string(cfg.Protocol), "ProtocolVersion": cfg.ProtocolVersion, "Pid": cfg.Pid, "Test": true,
		"Addr": addr{cfg.Addr.Network(), cfg.Addr.String()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tofuRun runs OpenTofu in dir; it gives the exit code and the output.
func tofuRun(t *testing.T, bin, dir string, env []string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String()
	}
	t.Fatalf("tofu %v: %v\n%s", args, err, out.String())
	return 0, ""
}

// switchyard_dns_rrset through real OpenTofu against bind9 and knot (issue 12
// item 3): apply creates the RRsets, a plan with nothing changed is empty and a
// second apply sends no update, a hand edit is drift that apply puts back, a
// TTL change is an in-place update, and destroy removes exactly the RRsets.
func TestDNSRRSetTofu(t *testing.T) {
	bin := os.Getenv("SWITCHYARD_TOFU")
	if bin == "" {
		testbed.Unavailable(t, "OpenTofu ($SWITCHYARD_TOFU)", "testbed/setup.sh", errors.New("SWITCHYARD_TOFU is not set"))
	}
	reattach := reattachProvider(t)
	for _, kind := range dnsserver.Kinds() {
		t.Run(kind, func(t *testing.T) {
			s := dnsserver.Start(t, kind, "tenant.test", "hmac-sha512")
			setRun(t, contract.Run{DNSKeyFile: s.KeyFile}) // the reattached provider runs in this process
			dir := t.TempDir()
			cliConfig := filepath.Join(dir, "cli.tfrc")
			// Nothing may come from a registry: the provider is reattached.
			if err := os.WriteFile(cliConfig, []byte("provider_installation {\n  direct {\n    exclude = [\""+Address+"\"]\n  }\n}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			env := append(os.Environ(), "TF_REATTACH_PROVIDERS="+reattach, "TF_CLI_CONFIG_FILE="+cliConfig,
				"CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1")
			txt, err := dnsupdate.Canonical("TXT", strings.Repeat("t", 300), s.Zone)
			if err != nil {
				t.Fatal(err)
			}
			write := func(ttl int) {
				cfg := map[string]any{
					"terraform": map[string]any{"required_providers": map[string]any{
						"switchyard": map[string]any{"source": Address}}},
					"resource": map[string]any{"switchyard_dns_rrset": map[string]any{
						"www": map[string]any{"server": s.Addr, "zone": s.Zone, "name": "www." + s.Zone, "type": "A",
							"ttl": ttl, "records": []string{"192.0.2.1", "192.0.2.2"}},
						"txt": map[string]any{"server": s.Addr, "zone": s.Zone, "name": s.Zone, "type": "TXT",
							"ttl": 300, "records": []string{txt}},
					}},
				}
				b, _ := json.MarshalIndent(cfg, "", "  ")
				if err := os.WriteFile(filepath.Join(dir, "main.tf.json"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			must := func(want int, args ...string) string {
				t.Helper()
				code, out := tofuRun(t, bin, dir, env, args...)
				if code != want {
					t.Fatalf("tofu %v: exit %d, want %d\n%s", args, code, want, out)
				}
				return out
			}
			write(300)
			must(0, "init", "-input=false", "-no-color")
			must(0, "apply", "-auto-approve", "-input=false", "-no-color")
			if ttl, recs := s.Query(t, "www."+s.Zone, "A"); ttl != 300 || !slices.Equal(recs, []string{"192.0.2.1", "192.0.2.2"}) {
				t.Fatalf("after apply: %d %v", ttl, recs)
			}
			if _, recs := s.Query(t, s.Zone, "TXT"); !slices.Equal(recs, []string{txt}) {
				t.Fatalf("after apply: TXT %v", recs)
			}

			before := s.Updates(t)
			must(0, "plan", "-detailed-exitcode", "-input=false", "-no-color")
			must(0, "apply", "-auto-approve", "-input=false", "-no-color")
			if n := s.Updates(t); n != before {
				t.Errorf("a second apply with nothing changed sent %d updates", n-before)
			}

			s.NSUpdate(t, "update delete www."+s.Zone+" A 192.0.2.2\n")
			out := must(2, "plan", "-detailed-exitcode", "-input=false", "-no-color")
			if !strings.Contains(out, "192.0.2.2") || !strings.Contains(out, "1 to change") {
				t.Errorf("the plan after a hand edit:\n%s", out)
			}
			must(0, "apply", "-auto-approve", "-input=false", "-no-color")
			if _, recs := s.Query(t, "www."+s.Zone, "A"); !slices.Equal(recs, []string{"192.0.2.1", "192.0.2.2"}) {
				t.Fatalf("after the restoring apply: %v", recs)
			}

			write(60)
			out = must(2, "plan", "-detailed-exitcode", "-input=false", "-no-color")
			if !strings.Contains(out, "1 to change, 0 to destroy") {
				t.Errorf("a TTL change is not one in-place update:\n%s", out)
			}
			must(0, "apply", "-auto-approve", "-input=false", "-no-color")
			if ttl, _ := s.Query(t, "www."+s.Zone, "A"); ttl != 60 {
				t.Fatalf("ttl after apply: %d", ttl)
			}

			must(0, "destroy", "-auto-approve", "-input=false", "-no-color")
			for _, typ := range []string{"A", "TXT"} {
				name := s.Zone
				if typ == "A" {
					name = "www." + s.Zone
				}
				if _, recs := s.Query(t, name, typ); len(recs) != 0 {
					t.Errorf("after destroy: %s %v", typ, recs)
				}
			}
			if _, recs := s.Query(t, "ns1."+s.Zone, "A"); len(recs) != 1 {
				t.Errorf("destroy touched the zone's own records: ns1 A %v", recs)
			}
		})
	}
}
