package rotaworker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/clock"
)

func TestPrefetchOf(t *testing.T) {
	t.Parallel()
	tests := []struct{ cfg, conc, want int }{
		{0, 1, 1}, {0, 2, 2}, {0, 256, DefaultPrefetch}, {-1, 256, 0}, {10, 2, 10},
	}
	for _, tt := range tests {
		if got := prefetchOf(tt.cfg, tt.conc); got != tt.want {
			t.Errorf("prefetchOf(%d, %d) = %d, want %d", tt.cfg, tt.conc, got, tt.want)
		}
	}
}

// TestHandPrefetchesOnlyQuickKinds: a kind asks for its concurrency until
// a run was seen to be quick, then for the prefetch as well; a slow
// average or a prefetched run that waited in vain stops that.
func TestHandPrefetchesOnlyQuickKinds(t *testing.T) {
	t.Parallel()
	h := newHand(2, 3)
	stop := make(chan struct{})
	if n, _ := h.reserve(stop); n != 2 {
		t.Fatalf("first reserve %d, want the concurrency 2 (run time unknown)", n)
	}
	h.leave(5 * time.Millisecond) // quick: the limit is 5, 1 held
	if n, _ := h.reserve(stop); n != 4 {
		t.Fatalf("reserve after a quick run %d, want 4", n)
	}
	h.unreserve(2) // 3 held
	for range 3 {
		h.leave(time.Second) // the average climbs past QuickRun
	}
	if h.avg < QuickRun {
		t.Fatalf("average %v after slow runs", h.avg)
	}
	if n, _ := h.reserve(stop); n != 2 {
		t.Fatalf("reserve of a slow kind %d, want 2", n)
	}
	h.unreserve(2)
	h.avg = time.Millisecond
	h.slow(BufferWait)
	if got := h.limit(); got != 2 {
		t.Errorf("limit after a vain wait %d, want 2", got)
	}
	close(stop)
	h.n = 2
	if _, ok := h.reserve(stop); ok {
		t.Error("reserve of a full hand returned after the stop")
	}
}

// TestHandClaimsAtMostTheServersMax: a claim never asks for more than the
// server allows; a larger concurrency takes more claims.
func TestHandClaimsAtMostTheServersMax(t *testing.T) {
	t.Parallel()
	h := newHand(maxClaim+100, 4)
	stop := make(chan struct{})
	for _, want := range []int{maxClaim, 100} {
		if n, _ := h.reserve(stop); n != want {
			t.Errorf("reserve %d, want %d", n, want)
		}
	}
}

// TestWaitSlot drives a prefetched run's wait for a slot on a fake clock.
func TestWaitSlot(t *testing.T) {
	t.Parallel()
	full := func() chan struct{} { s := make(chan struct{}, 1); s <- struct{}{}; return s }
	t.Run("free slot", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(time.Unix(0, 0))
		slots := make(chan struct{}, 1)
		if err := waitSlot(context.Background(), slots, nil, clk); err != nil || len(slots) != 1 || clk.Timers() != 0 {
			t.Errorf("err %v, slots taken %d, timers %d", err, len(slots), clk.Timers())
		}
	})
	t.Run("a slot frees before BufferWait", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(time.Unix(0, 0))
		slots := full()
		res := make(chan error, 1)
		go func() { res <- waitSlot(context.Background(), slots, nil, clk) }()
		waitTimers(t, clk, 1)
		clk.Advance(BufferWait - time.Millisecond)
		<-slots
		if err := <-res; err != nil || len(slots) != 1 {
			t.Errorf("err %v, slots taken %d", err, len(slots))
		}
	})
	t.Run("BufferWait passes", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(time.Unix(0, 0))
		res := make(chan error, 1)
		go func() { res <- waitSlot(context.Background(), full(), nil, clk) }()
		waitTimers(t, clk, 1)
		clk.Advance(BufferWait - time.Millisecond)
		select {
		case err := <-res:
			t.Fatalf("returned %v before BufferWait", err)
		case <-time.After(20 * time.Millisecond):
		}
		clk.Advance(time.Millisecond)
		if err := <-res; !errors.Is(err, errBufferWait) {
			t.Errorf("err %v, want errBufferWait", err)
		}
	})
	t.Run("worker stops", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(time.Unix(0, 0))
		stopping := make(chan struct{})
		res := make(chan error, 1)
		go func() { res <- waitSlot(context.Background(), full(), stopping, clk) }()
		waitTimers(t, clk, 1)
		close(stopping)
		if err := <-res; !errors.Is(err, errNotStarted) {
			t.Errorf("err %v, want errNotStarted", err)
		}
	})
	t.Run("run cancelled", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(time.Unix(0, 0))
		ctx, cancel := context.WithCancelCause(context.Background())
		res := make(chan error, 1)
		go func() { res <- waitSlot(ctx, full(), nil, clk) }()
		waitTimers(t, clk, 1)
		cancel(ErrTaskStopped)
		if err := <-res; !errors.Is(err, ErrTaskStopped) {
			t.Errorf("err %v, want ErrTaskStopped", err)
		}
	})
}

// waitTimers waits until clk has n timers pending.
func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for clk.Timers() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers, want %d", clk.Timers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAdaptivePrefetch: the default prefetch of a quick kind is what its
// slots start within PrefetchHorizon, between DefaultPrefetch and the
// concurrency; a configured prefetch stays as configured.
func TestAdaptivePrefetch(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg, conc int
		avg       time.Duration
		want      int // the limit
	}{
		{0, 256, -1, 256},                         // run time unknown: no prefetch
		{0, 256, 0, 512},                          // no-op runs: the concurrency again
		{0, 256, time.Millisecond, 512},           // 2,560 starts in 10 ms, capped
		{0, 256, 50 * time.Millisecond, 256 + 51}, // 256 × 10/50
		{0, 256, 2 * time.Second / 10, 256},       // slower than QuickRun: none
		{0, 8, 90 * time.Millisecond, 8 + 4},      // 0.9 starts: DefaultPrefetch
		{0, 1, 0, 2},                              // concurrency 1: at most 1
		{3, 256, 0, 259},                          // configured: fixed
		{-1, 256, 0, 256},                         // none
	} {
		h := newHandFor(tt.cfg, tt.conc)
		h.avg = tt.avg
		if got := h.limit(); got != tt.want {
			t.Errorf("Prefetch %d, concurrency %d, runs of %v: limit %d, want %d", tt.cfg, tt.conc, tt.avg, got, tt.want)
		}
		if m := h.maxPrefetch(); h.limit()-tt.conc > m {
			t.Errorf("Prefetch %d, concurrency %d: limit %d beyond the concurrency plus maxPrefetch %d", tt.cfg, tt.conc, h.limit(), m)
		}
	}
}
