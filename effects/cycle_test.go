package effects

import (
	"testing"
	"time"

	"github.com/switchyard-nix/switchyard/verdict"
)

func TestNextSampleIn(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	const interval = 5 * time.Second
	for _, c := range []struct {
		took, want time.Duration // how long the last sample has taken; the wait
	}{
		{0, 5 * time.Second},                               // the first window: a whole interval
		{300 * time.Millisecond, 4700 * time.Millisecond},  // a quick sample: the rest of the interval
		{2500 * time.Millisecond, 2500 * time.Millisecond}, // exactly half
		{3 * time.Second, 2500 * time.Millisecond},         // a slow one: half an interval at least
		{7 * time.Second, 2500 * time.Millisecond},         // longer than the interval
	} {
		if got := nextSampleIn(t0, t0.Add(c.took), interval); got != c.want {
			t.Errorf("sample took %v: wait %v, want %v", c.took, got, c.want)
		}
	}
	if got := nextSampleIn(t0, t0.Add(time.Second), 0); got != 0 {
		t.Errorf("interval 0: wait %v, want 0", got)
	}
}

func TestWindowStart(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		at   time.Time
		want time.Time
	}{
		{"the last sample began before the watch", now.Add(-1500 * time.Millisecond), now.Add(-1500 * time.Millisecond)},
		{"a sample with no time", time.Time{}, now},
		{"a sample stamped later than now", now.Add(time.Second), now},
		{"a sample just now", now, now},
	} {
		if got := windowStart(verdict.Sample{At: c.at}, now); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// With the first window's start, the watch's first wait is the rest of the
	// interval after that sample, as for the windows after it.
	last := verdict.Sample{At: now.Add(-1500 * time.Millisecond)}
	if got := nextSampleIn(windowStart(last, now), now, 5*time.Second); got != 3500*time.Millisecond {
		t.Errorf("first wait %v, want 3.5s", got)
	}
}
