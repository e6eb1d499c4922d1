package cli

import (
	"bytes"
	"strings"
	"testing"

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
