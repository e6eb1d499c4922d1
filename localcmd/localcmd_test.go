package localcmd

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestOutput(t *testing.T) {
	ctx := context.Background()
	out, err := Output(ctx, []string{"X=1"}, "sh", "-c", `printf '%s' "$X"`)
	if err != nil || string(out) != "1" {
		t.Errorf("env: %q, %v", out, err)
	}
	_, err = Output(ctx, nil, "sh", "-c", "echo first >&2; echo the reason >&2; exit 3")
	var e *Error
	var exit *exec.ExitError
	if !errors.As(err, &e) || !errors.As(err, &exit) || exit.ExitCode() != 3 ||
		err.Error() != "sh: exit status 3: the reason" || e.Stderr != "first\nthe reason" {
		t.Errorf("failure: %v (%#v)", err, e)
	}
}

// Cancelled, a command gets SIGINT first: one that handles it ends its own way.
func TestOutputInterruptsOnCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Output(ctx, nil, "sh", "-c", `trap 'echo interrupted >&2; exit 7' INT; while :; do sleep 0.05; done`)
	if err == nil || !strings.Contains(err.Error(), "interrupted") || time.Since(start) > Grace {
		t.Errorf("cancelled: %v after %v", err, time.Since(start))
	}
}
