package methods

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A receipt key that cannot be used refuses the run naming the flag or the
// variable it came from, never its path; none at all is an unsigned receipt.
func TestReceiptKey(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvReceiptKey {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		flag, env, says string
	}{
		{bad, "", "--receipt-key: "},
		{"", bad, "SWITCHYARD_RECEIPT_KEY: "},
		{filepath.Join(dir, "missing"), "", "--receipt-key: "},
	} {
		_, _, err := receiptKey(c.flag, env(c.env))
		if !errors.Is(err, ErrRefused) || !strings.HasPrefix(err.Error(), c.says) || strings.Contains(err.Error(), dir) {
			t.Errorf("receiptKey(%q, %q): %v", c.flag, c.env, err)
		}
	}
	if k, f, err := receiptKey("", env("")); k != nil || f != "" || err != nil {
		t.Errorf("no key: %v %q %v", k, f, err)
	}
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("no ssh-keygen")
	}
	good := filepath.Join(dir, "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", good).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	// The flag wins over the variable.
	if k, f, err := receiptKey(good, env(bad)); k == nil || f != good || err != nil {
		t.Errorf("a good key: %v %q %v", k, f, err)
	}
}
