package dispatch

import (
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of BackoffConfig.
const (
	DefaultBackoffBase = time.Second
	DefaultBackoffMax  = time.Hour
)

// BackoffConfig shapes the delay before the retry that follows the nth
// failed run: min(Base·2^(n−1), Max)·(1 + U[0, 0.2)). Zero values mean the
// defaults.
type BackoffConfig struct {
	Base time.Duration // default DefaultBackoffBase
	Max  time.Duration // default DefaultBackoffMax
	// Jitter returns a number in [0,1); default math/rand/v2.Float64.
	Jitter func() float64
}

// Backoff computes retry delays (the store applies them: RunComplete and
// RunExpire take it as their Backoff). It has no background loop. Safe for
// concurrent use when Jitter is.
type Backoff struct {
	cfg BackoffConfig // immutable
}

// NewBackoff returns a Backoff with cfg's defaults applied.
func NewBackoff(cfg BackoffConfig) *Backoff {
	if cfg.Base <= 0 {
		cfg.Base = DefaultBackoffBase
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultBackoffMax
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	return &Backoff{cfg: cfg}
}

// Delay is the delay before the retry that follows the nth failed run
// (n < 1 counts as 1).
func (b *Backoff) Delay(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	base := float64(b.cfg.Base) * math.Pow(2, float64(n-1))
	if base > float64(b.cfg.Max) {
		base = float64(b.cfg.Max)
	}
	return time.Duration(base * (1 + 0.2*b.cfg.Jitter()))
}
