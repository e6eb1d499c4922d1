package effects

import (
	"testing"
	"time"
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
