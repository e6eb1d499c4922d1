package cli

import (
	"bytes"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/effects"
	"github.com/switchyard-nix/switchyard/exitcode"
	"github.com/switchyard-nix/switchyard/plan/method"
)

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"version"}, &out, &errb); code != exitcode.OK {
		t.Fatalf("version exited %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "switchyard ") {
		t.Fatalf("version printed %q", out.String())
	}
}

func TestBadInvocationsExit2(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"version", "extra"}} {
		var out, errb bytes.Buffer
		if code := Main(args, &out, &errb); code != exitcode.Refused {
			t.Errorf("%q exited %d, want %d", args, code, exitcode.Refused)
		}
		if out.Len() != 0 {
			t.Errorf("%q wrote to stdout: %q", args, out.String())
		}
	}
}

// TestRunTakesReceiptKey: `tf run -- apply` deploys, so it signs receipts like apply.
func TestRunTakesReceiptKey(t *testing.T) {
	m, ok := method.Lookup("tf")
	if !ok {
		t.Fatal("no tf method")
	}
	f, err := parseMethodFlags(m, "run", []string{"--receipt-key", "deployer.key", "--", "apply"})
	if err != nil {
		t.Fatalf("tf run --receipt-key: %v", err)
	}
	if f.receiptKey != "deployer.key" || len(f.tofuArgs) != 1 || f.tofuArgs[0] != "apply" {
		t.Fatalf("tf run --receipt-key parsed as key %q, tofu args %q", f.receiptKey, f.tofuArgs)
	}
	if _, err := parseMethodFlags(m, "plan", []string{"--receipt-key", "deployer.key"}); err == nil {
		t.Fatal("plan accepted --receipt-key: it signs nothing")
	}
}

// Issue 34 items 2 and 3: apply's --mode, --reboot and --reboot-timeout are the same
// flags for every method, with the same help; no other verb takes them.
func TestApplyModeFlagsEveryMethod(t *testing.T) {
	var usage string
	for _, name := range []string{"ssh", "tf", "tf-incus", "tf-incus-operator"} {
		m, ok := method.Lookup(name)
		if !ok {
			t.Fatalf("no %s method", name)
		}
		f, err := parseMethodFlags(m, "apply", []string{"--mode", "boot", "--reboot", "--reboot-timeout", "90s"})
		if err != nil || f.mode != "boot" || !f.reboot || f.rebootTimeout != 90*time.Second {
			t.Errorf("%s apply: %+v, %v", name, f, err)
		}
		if f, err := parseMethodFlags(m, "apply", nil); err != nil || f.mode != "switch" || f.reboot || f.rebootTimeout != effects.DefaultRebootTimeout {
			t.Errorf("%s apply defaults: mode %q, reboot %v, timeout %s, %v", name, f.mode, f.reboot, f.rebootTimeout, err)
		}
		if _, err := parseMethodFlags(m, "plan", []string{"--reboot"}); err == nil {
			t.Errorf("%s plan accepted --reboot", name)
		}
		var b strings.Builder
		methodFlagSet(m, "apply", &methodFlags{}).VisitAll(func(fl *flag.Flag) {
			if fl.Name == "mode" || fl.Name == "reboot" || fl.Name == "reboot-timeout" {
				fmt.Fprintf(&b, "%s: %s\n", fl.Name, fl.Usage)
			}
		})
		if strings.Count(b.String(), "\n") != 3 || strings.Contains(b.String(), "refused") {
			t.Errorf("%s apply's flags:\n%s", name, b.String())
		}
		if usage != "" && b.String() != usage {
			t.Errorf("%s apply's help differs from ssh's:\n%s", name, b.String())
		}
		usage = b.String()
	}
}
