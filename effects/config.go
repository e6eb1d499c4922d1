package effects

import (
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// Config is the deploy body's tuning, read from the DEPLOY_* variables of SPEC 4.3.
type Config struct {
	StrictUnits    bool
	VerdictOnly    bool
	ChainTimeout   time.Duration
	ChainStall     time.Duration
	LoopGrace      time.Duration
	SettleAttempts int
	CycleInterval  time.Duration
	CycleWindows   int
	EvalCacheDir   string
	WaitTimeout    time.Duration
	SwitchTimeout  time.Duration
	// ConfirmTimeout is how long the node waits for the deployer's confirmation
	// before it switches itself back (SPEC 4.6); 0: no confirmation, no rollback.
	ConfirmTimeout time.Duration
	LockWait       time.Duration
	LockTTL        time.Duration
	// Mode is what the deploy does with the new generation (apply --mode, as
	// nixos-rebuild's verbs): ModeSwitch (the default, ""), ModeBoot or ModeTest.
	Mode Mode
	// Reboot is apply --reboot: once the boot entry points at the new generation, the
	// node reboots, and the verdict is that of the system it booted (reboot.go).
	Reboot bool
	// RebootTimeout bounds the wait for the node to come back on a new boot id
	// (apply --reboot-timeout); 0 is DefaultRebootTimeout.
	RebootTimeout time.Duration
}

// DefaultRebootTimeout is how long apply --reboot waits for a node to come back
// when --reboot-timeout is not given: a server's firmware alone can take minutes.
const DefaultRebootTimeout = 10 * time.Minute

// CheckReboot refuses what cannot go with --reboot: --mode test leaves the boot entry on
// the old generation, so the reboot would undo the activation it was asked to judge.
func (c Config) CheckReboot() error {
	if !c.Reboot {
		return nil
	}
	if c.Mode == ModeTest {
		return fmt.Errorf("--mode test leaves the boot entry on the old generation: the reboot would undo it")
	}
	if c.RebootTimeout < 0 {
		return fmt.Errorf("--reboot-timeout %s is negative", c.RebootTimeout)
	}
	return nil
}

// Mode is what a deploy does with the new generation, in nixos-rebuild's terms.
type Mode string

const (
	// ModeSwitch activates it, confirms it (SPEC 4.6), then points the system
	// profile and the default boot entry at it (finalize).
	ModeSwitch Mode = "switch"
	// ModeBoot points the system profile and the default boot entry at it and
	// activates nothing: the node runs it after its next boot, so it is not judged.
	ModeBoot Mode = "boot"
	// ModeTest activates and confirms it and leaves the system profile and the boot
	// entry alone: the node's next boot runs what it ran before.
	ModeTest Mode = "test"
)

// ParseMode reads apply's --mode; "" is ModeSwitch.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", ModeSwitch:
		return ModeSwitch, nil
	case ModeBoot, ModeTest:
		return Mode(s), nil
	}
	return "", fmt.Errorf("%q is not switch, boot or test", s)
}

// finalizes tells whether the mode points the profile and boot entry at the new
// generation after its confirmation ("" is ModeSwitch: a Config not read by ParseMode).
func (m Mode) finalizes() bool { return m == "" || m == ModeSwitch }

// action is switch-to-configuration's verb for the activation of the mode.
func (m Mode) action() string {
	if m == ModeTest {
		return "test"
	}
	return "switch"
}

// Variable is one DEPLOY_* variable: its name, default, meaning and how it sets Config.
type Variable struct {
	Name        string
	Default     string
	Description string
	set         func(c *Config, v string) error
}

// Variables declares every variable the body reads; nothing else is read.
var Variables = []Variable{
	{"DEPLOY_STRICT_UNITS", "1", "0: failed units are reported but do not fail the node", func(c *Config, v string) (err error) {
		c.StrictUnits, err = parseBool(v)
		return err
	}},
	{"DEPLOY_VERDICT_ONLY", "0", "1: the verdict-only pass: no build, no copy, no switch, no finalize", func(c *Config, v string) (err error) {
		c.VerdictOnly, err = parseBool(v)
		return err
	}},
	{"DEPLOY_CHAIN_TIMEOUT", "600", "seconds the chain gate may wait", func(c *Config, v string) (err error) {
		c.ChainTimeout, err = parseSeconds(v)
		return err
	}},
	{"DEPLOY_CHAIN_STALL", "120", "seconds without any change in the chain before the gate stops early", func(c *Config, v string) (err error) {
		c.ChainStall, err = parseSeconds(v)
		return err
	}},
	{"DEPLOY_LOOP_GRACE", "600", "default restart-loop budget, seconds", func(c *Config, v string) (err error) {
		c.LoopGrace, err = parseSeconds(v)
		return err
	}},
	{"DEPLOY_SETTLE_ATTEMPTS", "12", "settle samples", func(c *Config, v string) (err error) {
		c.SettleAttempts, err = parseCount(v, 1)
		return err
	}},
	{"DEPLOY_CYCLE_INTERVAL", "5", "seconds between cycle-watch samples", func(c *Config, v string) (err error) {
		c.CycleInterval, err = parseSeconds(v)
		return err
	}},
	{"DEPLOY_CYCLE_WINDOWS", "4", "cycle-watch windows", func(c *Config, v string) (err error) {
		c.CycleWindows, err = parseCount(v, 0)
		return err
	}},
	// Restart loops are no longer judged by a share of samples but by systemd's own
	// restart records (verdict.Input.loop), so the share has nothing left to tune. It
	// is still read and checked: a caller that sets it keeps working, and a typo in it
	// is still refused by name rather than ignored.
	{"DEPLOY_LOOPING_BEFORE_GAP", "0.3", "accepted for compatibility and checked (a share in (0, 1]); restart loops are measured by systemd's restart records, not by a share of samples", func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0 && f <= 1) {
			return fmt.Errorf("%q is not a share between 0 (excluded) and 1", v)
		}
		return nil
	}},
	{"DEPLOY_EVAL_CACHE_DIR", "$XDG_CACHE_HOME/switchyard/eval", "eval cache directory", func(c *Config, v string) error {
		if v == "" {
			return fmt.Errorf("is empty")
		}
		c.EvalCacheDir = v
		return nil
	}},
	{"DEPLOY_WAIT_TIMEOUT", "30", "seconds the wait phase waits for an unreachable node", func(c *Config, v string) (err error) {
		c.WaitTimeout, err = parseSeconds(v)
		return err
	}},
	{"DEPLOY_SWITCH_TIMEOUT", "900", "seconds the switch's transient unit may run; then it is stopped, the switch is an error and the boot entry is reverted", func(c *Config, v string) error {
		d, err := parseSeconds(v)
		// 0 would be systemd's "no timeout": a bound must bound.
		if err != nil || d < time.Millisecond {
			return fmt.Errorf("%q is not a number of seconds greater than 0", v)
		}
		c.SwitchTimeout = d
		return nil
	}},
	{"DEPLOY_CONFIRM_TIMEOUT", "60", "seconds the node waits, after its activation ended, for the deployer to confirm the new generation over a fresh connection, before it switches itself back to the previous one; 0: no confirmation and no node-side rollback", func(c *Config, v string) (err error) {
		c.ConfirmTimeout, err = parseSeconds(v)
		return err
	}},
	{"DEPLOY_LOCK_WAIT", "0", "seconds a deploy waits for another deployer's lock on the node before it is refused (exit 2, naming the holder)", func(c *Config, v string) (err error) {
		c.LockWait, err = parseSeconds(v)
		return err
	}},
	{"DEPLOY_LOCK_TTL", "120", "seconds of the node lock's lease; the holder renews it every third of that while it works, and a lock left by a killed deployer is broken once its lease ran out", func(c *Config, v string) error {
		d, err := parseSeconds(v)
		if err != nil || d < time.Second {
			return fmt.Errorf("%q is not a number of seconds of at least 1", v)
		}
		c.LockTTL = d
		return nil
	}},
}

// ConfigFromEnv reads every DEPLOY_* variable through getenv (os.Getenv in
// production). A value that does not parse is an error naming the variable; an
// unset or empty variable takes its default.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var c Config
	for _, v := range Variables {
		val := getenv(v.Name)
		if val == "" {
			val = v.Default
			if v.Name == "DEPLOY_EVAL_CACHE_DIR" {
				if val = defaultEvalCacheDir(getenv); val == "" {
					continue // off
				}
			}
		}
		if err := v.set(&c, val); err != nil {
			return Config{}, fmt.Errorf("%s: %w", v.Name, err)
		}
	}
	return c, nil
}

// defaultEvalCacheDir is $XDG_CACHE_HOME/switchyard/eval, or under $HOME/.cache; with
// neither it is "", the cache off: never a shared directory such as /tmp (SPEC 6.9).
func defaultEvalCacheDir(getenv func(string) string) string {
	base := getenv("XDG_CACHE_HOME")
	if base == "" {
		home := getenv("HOME")
		if home == "" {
			return ""
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "switchyard", "eval")
}

func parseBool(v string) (bool, error) {
	switch v {
	case "1":
		return true, nil
	case "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not 0 or 1", v)
}

// parseSeconds accepts a non-negative number of seconds; fractions are allowed so
// tests can use short windows.
func parseSeconds(v string) (time.Duration, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1e7) {
		return 0, fmt.Errorf("%q is not a number of seconds", v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func parseCount(v string, min int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > 100000 {
		return 0, fmt.Errorf("%q is not a whole number >= %d", v, min)
	}
	return n, nil
}
