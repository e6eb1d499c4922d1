package effects

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigDefaults(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{"XDG_CACHE_HOME": "/c"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		StrictUnits: true, VerdictOnly: false, ChainTimeout: 600 * time.Second, ChainStall: 120 * time.Second,
		LoopGrace: 600 * time.Second, SettleAttempts: 12, CycleInterval: 5 * time.Second, CycleWindows: 4,
		EvalCacheDir: "/c/switchyard/eval", WaitTimeout: 30 * time.Second,
		SwitchTimeout: 900 * time.Second, ConfirmTimeout: 60 * time.Second, LockWait: 0, LockTTL: 120 * time.Second,
	}
	if c != want {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
}

func TestConfigValues(t *testing.T) {
	c, err := ConfigFromEnv(env(map[string]string{
		"DEPLOY_STRICT_UNITS": "0", "DEPLOY_VERDICT_ONLY": "1", "DEPLOY_CYCLE_INTERVAL": "0.5",
		"DEPLOY_SETTLE_ATTEMPTS": "3", "DEPLOY_LOOPING_BEFORE_GAP": "1", "DEPLOY_EVAL_CACHE_DIR": "/e",
		"DEPLOY_SWITCH_TIMEOUT": "2.5",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.StrictUnits || !c.VerdictOnly || c.CycleInterval != 500*time.Millisecond || c.SettleAttempts != 3 ||
		c.EvalCacheDir != "/e" || c.SwitchTimeout != 2500*time.Millisecond {
		t.Fatalf("got %+v", c)
	}
}

func TestConfigRefusesBadValuesByName(t *testing.T) {
	for name, bad := range map[string]string{
		"DEPLOY_STRICT_UNITS": "yes", "DEPLOY_VERDICT_ONLY": "2", "DEPLOY_CHAIN_TIMEOUT": "ten",
		"DEPLOY_CHAIN_STALL": "-1", "DEPLOY_LOOP_GRACE": "1e99", "DEPLOY_SETTLE_ATTEMPTS": "0",
		"DEPLOY_CYCLE_INTERVAL": "5s", "DEPLOY_CYCLE_WINDOWS": "1.5", "DEPLOY_LOOPING_BEFORE_GAP": "0",
		"DEPLOY_WAIT_TIMEOUT": "NaN", "DEPLOY_SWITCH_TIMEOUT": "0",
		"DEPLOY_LOCK_WAIT": "-3", "DEPLOY_LOCK_TTL": "0.5",
	} {
		_, err := ConfigFromEnv(env(map[string]string{name: bad}))
		if err == nil {
			t.Errorf("%s=%q accepted", name, bad)
			continue
		}
		if !strings.HasPrefix(err.Error(), name+": ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s=%q: error %q does not name the variable on one line", name, bad, err)
		}
	}
}
