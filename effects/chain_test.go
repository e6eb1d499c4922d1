package effects

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/verdict"
)

// chainSample is the sample recorded on a test-bed node after the chain-oneshot
// closure's switch: prepare-secrets.service (a plain oneshot) ran and exited, and
// hello.service is up.
func chainSample(t *testing.T) verdict.Sample {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "chain-oneshot", "sample.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := verdict.ParseSample(raw, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChainCompute(t *testing.T) {
	members := []string{"prepare-secrets.service", "hello.service"}
	rec := chainSample(t)
	head := rec.Units["prepare-secrets.service"]
	if head.Type != "oneshot" || head.ActiveState != "inactive" || head.ExecMainStart < rec.Activated || rec.Activated == 0 {
		t.Fatalf("recorded head is not a oneshot that ran since the activation: %+v (activated %d)", head, rec.Activated)
	}
	tests := []struct {
		name                    string
		edit                    func(s *verdict.Sample, head *verdict.Unit)
		wantUp                  bool
		wantWaiting, wantFailed string
	}{
		{name: "recorded: the oneshot ran since the activation, the tail is up", wantUp: true},
		{name: "the oneshot ran before the activation", edit: func(s *verdict.Sample, h *verdict.Unit) { s.Activated = h.ExecMainStart + 1 },
			wantWaiting: "prepare-secrets.service"},
		{name: "activation time unknown", edit: func(s *verdict.Sample, h *verdict.Unit) { s.Activated = 0 },
			wantWaiting: "prepare-secrets.service"},
		{name: "RemainAfterExit=yes and inactive: not done", edit: func(s *verdict.Sample, h *verdict.Unit) { h.RemainAfterExit = true },
			wantWaiting: "prepare-secrets.service"},
		{name: "not a oneshot: an exited simple service is not done", edit: func(s *verdict.Sample, h *verdict.Unit) { h.Type = "simple" },
			wantWaiting: "prepare-secrets.service"},
		{name: "skipped by a condition: never ran", edit: func(s *verdict.Sample, h *verdict.Unit) {
			h.ExecMainStart, h.ExecMainExit, h.ExecMainCode, h.ExecMainStatus = 0, 0, 0, 0
		}, wantWaiting: "prepare-secrets.service"},
		{name: "still running", edit: func(s *verdict.Sample, h *verdict.Unit) {
			h.ActiveState, h.SubState, h.ExecMainExit = "activating", "start", 0
		}, wantWaiting: "prepare-secrets.service"},
		{name: "failed", edit: func(s *verdict.Sample, h *verdict.Unit) {
			h.ActiveState, h.SubState, h.Result, h.ExecMainStatus = "failed", "failed", "exit-code", 1
		}, wantWaiting: "prepare-secrets.service", wantFailed: "prepare-secrets.service"},
		{name: "the tail is absent", edit: func(s *verdict.Sample, h *verdict.Unit) { delete(s.Units, "hello.service") },
			wantWaiting: "hello.service"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := rec
			s.Units = map[string]verdict.Unit{}
			for k, v := range rec.Units {
				s.Units[k] = v
			}
			h := s.Units["prepare-secrets.service"]
			if tc.edit != nil {
				tc.edit(&s, &h)
			}
			s.Units["prepare-secrets.service"] = h
			d := chainCompute(members, s, nil)
			if d.up != tc.wantUp || d.waiting != tc.wantWaiting || d.failed != tc.wantFailed || !d.changed {
				t.Errorf("got up=%v waiting=%q failed=%q changed=%v; want up=%v waiting=%q failed=%q changed=true",
					d.up, d.waiting, d.failed, d.changed, tc.wantUp, tc.wantWaiting, tc.wantFailed)
			}
			if again := chainCompute(members, s, d.states); again.changed {
				t.Errorf("the same sample again reads as a change: %v -> %v", d.states, again.states)
			}
		})
	}
}
