package tofu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-version"

	"github.com/switchyard-nix/switchyard/redact"
)

func TestApplyArgs(t *testing.T) {
	got := ApplyArgs(true, []string{`switchyard_deployment.node["web1"]`}, 16)
	want := []string{"apply", "-no-color", "-auto-approve", "-input=false", "-lock=true", "-parallelism=16",
		`-target=switchyard_deployment.node["web1"]`, "-json"}
	if !slices.Equal(got, want) {
		t.Errorf("ApplyArgs = %q, want %q", got, want)
	}
	if got := ApplyArgs(false, nil, 0); !slices.Equal(got, []string{"apply", "-no-color", "-auto-approve", "-input=false", "-lock=true"}) {
		t.Errorf("ApplyArgs(text) = %q", got)
	}
}

// script is an executable shell script standing in for OpenTofu in Run's tests.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tofu")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A failed run's error carries the end of its stderr (a state lock is read from
// it); a cancelled run gets SIGINT first, and its error says it was cancelled.
func TestRun(t *testing.T) {
	w := &Workspace{Dir: t.TempDir(), Env: map[string]string{"A": "b"}}
	w.Bin = script(t, `echo "out $A $TF_IN_AUTOMATION $*"; echo "Error: Error acquiring the state lock" >&2; exit 1`)
	var out strings.Builder
	err := w.Run(context.Background(), []string{"apply", "-json"}, &out, nil)
	if out.String() != "out b 1 apply -json\n" || err == nil || LockError(false, err) == nil {
		t.Errorf("stdout %q, err %v", out.String(), err)
	}

	marker := filepath.Join(t.TempDir(), "interrupted")
	w.Bin = script(t, `trap 'echo int > `+marker+`; exit 130' INT; echo started; while :; do sleep 0.1; done`)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	pr, pw, _ := os.Pipe()
	go func() {
		buf := make([]byte, 8)
		pr.Read(buf)
		close(started)
	}()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, []string{"apply"}, pw, nil) }()
	<-started
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled run: %v", err)
		}
	case <-time.After(interruptGrace + 5*time.Second):
		t.Fatal("the cancelled run did not end")
	}
	if b, _ := os.ReadFile(marker); string(b) != "int\n" {
		t.Errorf("the run got no SIGINT: %q", b)
	}
}

// The version is kept per binary: another file at the same path is asked again.
func TestCachedVersion(t *testing.T) {
	w := &Workspace{Dir: t.TempDir(), Bin: script(t, "exit 0")}
	if w.CachedVersion() != nil {
		t.Fatal("a version before any was saved")
	}
	if err := w.SaveVersion(version.Must(version.NewVersion("1.10.6"))); err != nil {
		t.Fatal(err)
	}
	if v := w.CachedVersion(); v == nil || v.String() != "1.10.6" {
		t.Errorf("cached %v", v)
	}
	if err := os.WriteFile(w.Bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(w.Bin, time.Now(), time.Now().Add(time.Hour))
	if v := w.CachedVersion(); v != nil {
		t.Errorf("a rebuilt binary kept the version %v", v)
	}
}

// SPEC 6.9: what OpenTofu prints reaches the writers, the error and the events with
// the credentials redact.Default holds redacted.
func TestRunRedactsCredentials(t *testing.T) {
	redact.Default.Add(`MARKER-run-secret"q`)
	w := &Workspace{Dir: t.TempDir(), Env: map[string]string{}}
	w.Bin = script(t, `printf '%s\n' '{"@level":"error","@message":"Error: MARKER-run-secret\"q","type":"diagnostic"}'; printf 'saw MARKER-run-secret"q' >&2; exit 1`)
	var out, errOut strings.Builder
	err := w.Run(context.Background(), []string{"apply", "-json"}, &out, &errOut)
	for name, s := range map[string]string{"stdout": out.String(), "stderr": errOut.String(), "error": fmt.Sprint(err)} {
		if strings.Contains(s, "MARKER") || !strings.Contains(s, redact.Mark) {
			t.Errorf("%s: %q", name, s)
		}
	}
	if l, ok := LogLine([]byte(strings.TrimSpace(out.String()))); !ok || l.Msg != "tofu: Error: "+redact.Mark {
		t.Errorf("the redacted line is not the same event: %+v %v", l, ok)
	}
	if l, _ := LogLine([]byte(`{"@level":"error","@message":"Error: MARKER-run-secret\"q","type":"diagnostic"}`)); strings.Contains(l.Msg, "MARKER") {
		t.Errorf("LogLine: %q", l.Msg)
	}
}
