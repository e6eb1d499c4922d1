package methods

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/provider/contract"
)

// apply --reboot: every method takes it (the OpenTofu ones hand it to the provider);
// --mode test and a timeout that is not positive are refused (exit 2 by the caller),
// each naming the flag.
func TestCheckReboot(t *testing.T) {
	for _, c := range []struct {
		req  Request
		want string // "" accepted, else the refusal's start
	}{
		{Request{Reboot: true, RebootTimeout: time.Minute}, ""},
		{Request{RebootTimeout: 0}, ""},
		{Request{Reboot: true, RebootTimeout: 0}, "--reboot-timeout: "},
		{Request{Reboot: true, RebootTimeout: -time.Second}, "--reboot-timeout: "},
		{Request{Reboot: true, RebootTimeout: time.Minute, Mode: "test"}, "--reboot: --mode test"},
		{Request{Reboot: true, RebootTimeout: time.Minute, Mode: "boot"}, ""},
	} {
		cfg := effects.Config{}
		var err error
		if cfg.Mode, err = effects.ParseMode(c.req.Mode); err != nil {
			t.Fatal(err)
		}
		err = checkReboot(c.req, &cfg)
		switch {
		case c.want == "" && (err != nil || cfg.Reboot != c.req.Reboot || c.req.Reboot && cfg.RebootTimeout != c.req.RebootTimeout):
			t.Errorf("%+v: %v, reboot %v, timeout %s", c.req, err, cfg.Reboot, cfg.RebootTimeout)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") || cfg.Reboot):
			t.Errorf("%+v: %v, want %q...", c.req, err, c.want)
		}
	}
}

// The OpenTofu methods hand apply's mode and reboot to the provider's run: a switch
// without a reboot is the zero run (the provider's default), the rest as given.
func TestApplyModeInTheRun(t *testing.T) {
	for _, c := range []struct {
		cfg    effects.Config
		mode   string
		reboot bool
		wait   contract.Duration
	}{
		{effects.Config{Mode: effects.ModeSwitch}, "", false, 0},
		{effects.Config{Mode: effects.ModeSwitch, RebootTimeout: time.Minute}, "", false, 0},
		{effects.Config{Mode: effects.ModeTest}, "test", false, 0},
		{effects.Config{Mode: effects.ModeBoot, Reboot: true, RebootTimeout: 90 * time.Second}, "boot", true, contract.Duration(90 * time.Second)},
	} {
		mode, reboot, wait := applyMode(c.cfg)
		if mode != c.mode || reboot != c.reboot || wait != c.wait {
			t.Errorf("%+v: %q %v %s, want %q %v %s", c.cfg, mode, reboot, time.Duration(wait), c.mode, c.reboot, time.Duration(c.wait))
		}
	}
}
