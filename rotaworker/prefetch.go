package rotaworker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rotahq/rota/internal/clock"
)

// Prefetch tuning (see "Prefetch" in the package doc).
const (
	// DefaultPrefetch is the least runs a quick kind holds beyond its
	// concurrency when Config.Prefetch is 0 (and never more than the
	// concurrency); PrefetchHorizon may raise it.
	DefaultPrefetch = 4
	// QuickRun is the average run time under which a kind prefetches: a
	// kind whose handlers take longer gains nothing from it (a claim's
	// round trip is then a small part of a run), and a buffered run would
	// wait long for a slot.
	QuickRun = 100 * time.Millisecond
	// BufferWait is the longest a prefetched run waits for a free slot:
	// after it, the run is released (handed back unstarted, no retry spent)
	// so that another worker takes it, and the kind stops prefetching until
	// its runs are quick again.
	BufferWait = time.Second
	// maxClaim is the most runs one claim may ask for (the server's limit).
	maxClaim = 1000
	// PrefetchHorizon bounds the default prefetch of a quick kind: it holds
	// as many runs beyond its concurrency as its slots start, on average,
	// within this time (at least DefaultPrefetch, at most the concurrency).
	// Runs of a few milliseconds or less thus come in claims of up to twice
	// the concurrency, fewer and larger claims, and a prefetched run waits
	// about this long for a slot.
	PrefetchHorizon = 10 * time.Millisecond
)

// Reasons a run was handed back without its handler being called.
var (
	errNotStarted = errors.New("the worker stopped before the run got a free slot")
	errBufferWait = errors.New("the run waited too long for a free slot")
)

// prefetchOf is the prefetch of a kind of concurrency conc under cfg.
func prefetchOf(cfg int, conc int) int {
	switch {
	case cfg < 0:
		return 0
	case cfg == 0:
		return min(DefaultPrefetch, conc)
	}
	return cfg
}

// hand counts the runs a kind holds — running, or prefetched and waiting
// for a slot, or asked for by the claim in flight — and decides how many
// the next claim asks for: up to the concurrency, plus the prefetch while
// the kind's runs are quick.
type hand struct {
	// Immutable. adaptive: the prefetch is the default's, which grows
	// with the kind's speed (PrefetchHorizon) up to the concurrency.
	conc, prefetch int
	adaptive       bool

	mu  sync.Mutex    // guards the fields below
	n   int           // runs held
	avg time.Duration // moving average of the run time; < 0 while unknown

	room chan struct{} // buffered 1: signalled when n drops or the limit may have changed
}

// newHandFor is the hand of a kind of concurrency conc under the
// configured prefetch cfg (Config.Prefetch: 0 the adaptive default).
func newHandFor(cfg, conc int) *hand {
	h := newHand(conc, prefetchOf(cfg, conc))
	h.adaptive = cfg == 0
	return h
}

func newHand(conc, prefetch int) *hand {
	return &hand{conc: conc, prefetch: prefetch, avg: -1, room: make(chan struct{}, 1)}
}

// maxPrefetch is the most runs the kind may hold beyond its concurrency.
func (h *hand) maxPrefetch() int {
	if h.adaptive {
		return max(h.prefetch, h.conc)
	}
	return h.prefetch
}

// limit is how many runs the kind may hold now. h.mu is held.
func (h *hand) limit() int {
	if h.avg >= 0 && h.avg < QuickRun {
		extra := h.prefetch
		if h.adaptive {
			// The runs its slots start within PrefetchHorizon.
			starts := int64(h.conc) * int64(PrefetchHorizon) / int64(max(h.avg, time.Microsecond))
			extra = int(min(max(starts, int64(extra)), int64(h.conc)))
		}
		return h.conc + extra
	}
	return h.conc
}

// reserve waits until the kind may hold more runs, then reserves every
// one it may hold (at most the server's limit of one claim) and returns how
// many; false if stop closed first.
func (h *hand) reserve(stop <-chan struct{}) (int, bool) {
	for {
		h.mu.Lock()
		if k := min(h.limit()-h.n, maxClaim); k > 0 {
			h.n += k
			h.mu.Unlock()
			return k, true
		}
		h.mu.Unlock()
		select {
		case <-h.room:
		case <-stop:
			return 0, false
		}
	}
}

// unreserve gives back k reserved runs that did not come.
func (h *hand) unreserve(k int) {
	if k <= 0 {
		return
	}
	h.mu.Lock()
	h.n -= k
	h.mu.Unlock()
	h.signal()
}

// leave records that a run left the kind's hand; ran is how long its
// handler ran (0 when it never started, which leaves the average alone).
func (h *hand) leave(ran time.Duration) {
	h.mu.Lock()
	h.n--
	if ran > 0 {
		if h.avg < 0 {
			h.avg = ran
		} else {
			h.avg += (ran - h.avg) / 8
		}
	}
	h.mu.Unlock()
	h.signal()
}

// slow records that a prefetched run waited waited for a slot in vain:
// the kind prefetches no more until its runs are quick again.
func (h *hand) slow(waited time.Duration) {
	h.mu.Lock()
	h.avg = max(h.avg, waited, QuickRun)
	h.mu.Unlock()
}

func (h *hand) signal() {
	select {
	case h.room <- struct{}{}:
	default:
	}
}

// waitSlot takes a concurrency slot for a run that arrived: at once when
// one is free, else waiting up to BufferWait (on a timer of clk). It returns nil
// with the slot taken, errNotStarted if the worker stops claiming first,
// errBufferWait if the wait ended, or the cause of ctx (the run's) if it
// ended first.
func waitSlot(ctx context.Context, slots chan struct{}, stopping <-chan struct{}, clk clock.Clock) error {
	select {
	case slots <- struct{}{}:
		return nil
	default:
	}
	timer := clk.NewTimer(BufferWait)
	defer timer.Stop()
	select {
	case slots <- struct{}{}:
		return nil
	case <-stopping:
		return errNotStarted
	case <-timer.C():
		return errBufferWait
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
