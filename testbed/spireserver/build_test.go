package spireserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAwaitBuild(t *testing.T) {
	dir := t.TempDir()
	late := filepath.Join(dir, "late")
	go func() {
		time.Sleep(50 * time.Millisecond)
		os.WriteFile(late, []byte("ok 212\n"), 0o644)
	}()
	if err := awaitBuild(late, 5*time.Second, 10*time.Millisecond); err != nil {
		t.Errorf("a build that ends ok: %v", err)
	}
	failed := filepath.Join(dir, "failed")
	os.WriteFile(failed, []byte("FAILED (its log: /tmp/x) 97\n"), 0o644)
	if err := awaitBuild(failed, 5*time.Second, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "FAILED (its log: /tmp/x)") {
		t.Errorf("a failed build: err = %v", err)
	}
	if err := awaitBuild(filepath.Join(dir, "never"), 30*time.Millisecond, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "has not ended") {
		t.Errorf("a build that does not end: err = %v", err)
	}
}
