package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteMarkdown(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.md")
	os.WriteFile(path, []byte("old figures"), 0o644)
	when := time.Date(2026, 12, 6, 14, 30, 0, 0, time.UTC)
	if err := writeMarkdown(path, []byte("measure  switchyard\n(a) copy  1s\n\n"), when, "cpu, 2 cores, Linux 6.1", " -fleet-max 4"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	want := markdownHeader + "Run on 2026-12-06 14:30 UTC: cpu, 2 cores, Linux 6.1, `go run ./bench -fleet-max 4`. " +
		"What each row measures, and the goals: [speed.md](speed.md).\n\n```text\nmeasure  switchyard\n(a) copy  1s\n```\n"
	if string(b) != want {
		t.Errorf("got:\n%s\nwant:\n%s", b, want)
	}
	if !strings.Contains(machine(), "cores, Linux ") {
		t.Errorf("machine() = %q", machine())
	}
}
