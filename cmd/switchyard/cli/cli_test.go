package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/switchyard-nix/switchyard/exitcode"
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
