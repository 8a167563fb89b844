package pgstore

import (
	"testing"
	"time"
)

// TestWarmBudget: at most per warm-ups every period, counted from the
// first of each period.
func TestWarmBudget(t *testing.T) {
	t.Parallel()
	b := &warmBudget{per: 2, every: time.Minute}
	t0 := time.Unix(1_800_000_000, 0)
	for i, c := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {time.Second, true}, {2 * time.Second, false}, {59 * time.Second, false},
		{time.Minute, true}, {time.Minute + time.Second, true}, {time.Minute + 2*time.Second, false}} {
		if got := b.take(t0.Add(c.at)); got != c.want {
			t.Errorf("take %d at +%v = %v, want %v", i, c.at, got, c.want)
		}
	}
}
