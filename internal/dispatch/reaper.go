package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
)

// Defaults of ReaperConfig.
const (
	DefaultReapInterval = 500 * time.Millisecond
	DefaultReapBatch    = 500
)

// ReaperStore is what the lease reaper asks of the store.
type ReaperStore interface {
	// RunExpire and RunNextExpiry: see store.Store.
	RunExpire(ctx context.Context, p store.RunExpireParams) (store.RunExpireResult, error)
	RunNextExpiry(ctx context.Context) (time.Time, bool, error)
}

// LeaderFunc reports whether this node leads now, from a lease it knows is
// still its own, and the fencing term of its own leadership (current or
// last; see store.CheckFence), which its leader-only writes carry.
type LeaderFunc func() (term int64, leading bool)

// ReaperConfig configures a Reaper. Zero values mean the defaults.
type ReaperConfig struct {
	Store  ReaperStore  // required
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// Interval is the longest the reaper sleeps between looks for expired
	// leases (default DefaultReapInterval); it wakes earlier for a known
	// expiry.
	Interval time.Duration
	// BatchSize is how many runs one RunExpire call ends at most (default
	// DefaultReapBatch); the reaper calls again while batches are full.
	BatchSize int
	// Backoff gives the retry delay of runs past their deadline (nil:
	// retry at once).
	Backoff func(n int) time.Duration
	// Leader is asked before each round: only the leader reaps, and its
	// expiries carry its term. Nil: always leads, unfenced (term 0).
	Leader LeaderFunc
	// Expired is called after each batch that ended runs (events, wake-ups
	// and due times of the kinds made claimable). Nil: nothing.
	Expired func(ctx context.Context, res store.RunExpireResult)
}

// Reaper is the lease reaper, a leader duty: it ends RUNNING runs whose
// lease or deadline passed (store.RunExpire applies the retry rule) and
// sleeps until the next known expiry, at most Interval.
type Reaper struct {
	service
	cfg ReaperConfig // immutable after NewReaper
}

// NewReaper returns a Reaper; Start runs it.
func NewReaper(cfg ReaperConfig) (*Reaper, error) {
	if cfg.Store == nil {
		return nil, errors.New("dispatch: reaper: nil store")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultReapInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultReapBatch
	}
	if cfg.Leader == nil {
		cfg.Leader = func() (int64, bool) { return 0, true }
	}
	if cfg.Expired == nil {
		cfg.Expired = func(context.Context, store.RunExpireResult) {}
	}
	return &Reaper{service: service{name: "reaper"}, cfg: cfg}, nil
}

// Start runs the reaper in the background until ctx ends or Stop.
func (r *Reaper) Start(ctx context.Context) error { return r.start(ctx, r.loop) }

// Stop stops the reaper and waits for it. It is idempotent.
func (r *Reaper) Stop() { r.stop() }

func (r *Reaper) loop(ctx context.Context) {
	for {
		d := r.cfg.Interval
		if _, leading := r.cfg.Leader(); leading {
			d = r.runOnce(ctx)
		}
		if !sleep(ctx, r.cfg.Clock, d, nil) {
			return
		}
	}
}

// runOnce expires what is due now, under the leadership's term, and returns
// how long to sleep before the next look. It does not ask whether this node
// leads (the loop does): a write under a term that is not current is
// refused by the store (store.ErrFenced) and changes nothing.
func (r *Reaper) runOnce(ctx context.Context) time.Duration {
	c := r.cfg.Clock
	term, _ := r.cfg.Leader()
	for {
		res, err := r.cfg.Store.RunExpire(ctx, store.RunExpireParams{
			Now: c.Now(), Limit: r.cfg.BatchSize, Backoff: r.cfg.Backoff, Term: term,
		})
		switch {
		case errors.Is(err, store.ErrFenced):
			r.cfg.Logger.Warn("dispatch: lease expiry refused: this node no longer leads", "term", term, "err", err)
			return r.cfg.Interval
		case err != nil:
			if ctx.Err() == nil {
				r.cfg.Logger.Error("dispatch: expire leases", "err", err)
			}
			return r.cfg.Interval
		}
		if res.Expired > 0 {
			r.cfg.Expired(ctx, res)
		}
		if res.Expired < r.cfg.BatchSize {
			break
		}
	}
	next, ok, err := r.cfg.Store.RunNextExpiry(ctx)
	if err != nil || !ok {
		return r.cfg.Interval
	}
	return max(min(next.Sub(c.Now()), r.cfg.Interval), time.Millisecond)
}
