package dispatch

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	b := NewBackoff(BackoffConfig{Base: time.Second, Max: 10 * time.Second, Jitter: func() float64 { return 0 }})
	for n, want := range map[int]time.Duration{0: time.Second, 1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second,
		4: 8 * time.Second, 5: 10 * time.Second, 30: 10 * time.Second} {
		if got := b.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	maxJitter := NewBackoff(BackoffConfig{Base: time.Second, Max: 10 * time.Second, Jitter: func() float64 { return 0.999 }})
	if got := maxJitter.Delay(1); got <= time.Second || got > 1200*time.Millisecond {
		t.Errorf("Delay(1) with max jitter = %v, want in (1s, 1.2s]", got)
	}
}

func TestBackoffDefaults(t *testing.T) {
	t.Parallel()
	b := NewBackoff(BackoffConfig{Jitter: func() float64 { return 0 }})
	if got := b.Delay(1); got != DefaultBackoffBase {
		t.Errorf("Delay(1) = %v, want DefaultBackoffBase %v", got, DefaultBackoffBase)
	}
	if got := b.Delay(100); got != DefaultBackoffMax {
		t.Errorf("Delay(100) = %v, want DefaultBackoffMax %v", got, DefaultBackoffMax)
	}
	// The dispatcher's Backoff is its service's.
	d, err := New(Config{Store: nopStore{}, BackoffBase: 3 * time.Second, Jitter: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Backoff(2); got != 6*time.Second {
		t.Errorf("Dispatcher.Backoff(2) = %v, want 6s", got)
	}
}
