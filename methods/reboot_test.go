package methods

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/plan/method"
)

// apply --reboot: the ssh method takes it; the OpenTofu methods refuse it (exit 2 by
// the caller), as do --mode test and a timeout that is not positive, each naming the flag.
func TestCheckReboot(t *testing.T) {
	for _, c := range []struct {
		method string
		req    Request
		want   string // "" accepted, else the refusal's start
	}{
		{"ssh", Request{Reboot: true, RebootTimeout: time.Minute}, ""},
		{"ssh", Request{RebootTimeout: 0}, ""},
		{"ssh", Request{Reboot: true, RebootTimeout: 0}, "--reboot-timeout: "},
		{"ssh", Request{Reboot: true, RebootTimeout: time.Minute, Mode: "test"}, "--reboot: --mode test"},
		{"tf", Request{Reboot: true, RebootTimeout: time.Minute}, "--reboot: the tf method does not reboot nodes"},
		{"tf-incus", Request{Reboot: true, RebootTimeout: time.Minute}, "--reboot: the tf-incus method"},
		{"tf-incus-operator", Request{Reboot: true, RebootTimeout: time.Minute}, "--reboot: the tf-incus-operator method"},
	} {
		m, ok := method.Lookup(c.method)
		if !ok {
			t.Fatalf("no method %s", c.method)
		}
		cfg := effects.Config{}
		var err error
		if cfg.Mode, err = effects.ParseMode(c.req.Mode); err != nil {
			t.Fatal(err)
		}
		err = checkReboot(m, c.req, &cfg)
		switch {
		case c.want == "" && (err != nil || cfg.Reboot != c.req.Reboot):
			t.Errorf("%s %+v: %v, reboot %v", c.method, c.req, err, cfg.Reboot)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || cfg.Reboot):
			t.Errorf("%s %+v: %v, want %q...", c.method, c.req, err, c.want)
		}
	}
}
