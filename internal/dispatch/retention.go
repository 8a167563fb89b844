package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
)

// Defaults of RetentionConfig.
const (
	DefaultCleanupInterval = time.Minute
	DefaultCleanupBatch    = 1000
	// DefaultWorkerRetention is how long a worker gone (lost or stopped)
	// stays listed.
	DefaultWorkerRetention = 24 * time.Hour
)

// RetentionStore is what the retention cleanup asks of the store.
type RetentionStore interface {
	// TaskCleanup: see store.Store.
	TaskCleanup(ctx context.Context, p store.TaskCleanupParams) (int, error)
}

// AuditCleaner deletes old audit records (store.AccessStore's).
type AuditCleaner interface {
	// AuditCleanup: see store.AccessStore.
	AuditCleanup(ctx context.Context, before time.Time, limit int) (int, error)
}

// EventCleaner deletes events past the event retention
// (store.EventStore's).
type EventCleaner interface {
	// EventCleanup: see store.EventStore.
	EventCleanup(ctx context.Context, before time.Time, limit int) (int, error)
}

// WorkerPruner deletes workers gone longer than the worker retention.
type WorkerPruner interface {
	// WorkerPrune: see store.Store.
	WorkerPrune(ctx context.Context, p store.WorkerPruneParams) (int, error)
}

// RetentionConfig configures a Retention. Zero values mean the defaults.
type RetentionConfig struct {
	Store  RetentionStore // required
	Clock  clock.Clock    // default clock.Real
	Logger *slog.Logger   // default slog.Default()
	// Interval is how often the leader deletes finished tasks past their
	// kind's retention (default DefaultCleanupInterval).
	Interval time.Duration
	// BatchSize is how many tasks one TaskCleanup call deletes at most
	// (default DefaultCleanupBatch); a round calls again while batches are
	// full.
	BatchSize int
	// LeaderPoll is how often the loop looks whether a round is due and
	// this node leads (default DefaultReapInterval): a new leader cleans up
	// within it.
	LeaderPoll time.Duration
	// Leader: as ReaperConfig.Leader. Nil: always leads, unfenced.
	Leader LeaderFunc
	// Audit, when set with a positive AuditRetention, also deletes the
	// audit records older than AuditRetention each round.
	Audit          AuditCleaner
	AuditRetention time.Duration
	// Workers, when set with a positive WorkerRetention, also deletes
	// each round the workers not seen for WorkerRetention past their
	// liveness window (lost or stopped that long) that hold no runs.
	Workers         WorkerPruner
	WorkerRetention time.Duration
	// Events, when set with a positive EventRetention, also deletes each
	// round the events of the event log older than EventRetention.
	Events         EventCleaner
	EventRetention time.Duration
}

// Retention is the retention cleanup, a leader duty: every Interval it
// deletes finished tasks past their kind's RetentionSeconds, and audit
// records past AuditRetention, in batches.
type Retention struct {
	service
	cfg RetentionConfig // immutable after NewRetention
}

// NewRetention returns a Retention; Start runs it.
func NewRetention(cfg RetentionConfig) (*Retention, error) {
	if cfg.Store == nil {
		return nil, errors.New("dispatch: retention: nil store")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultCleanupInterval
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultCleanupBatch
	}
	if cfg.LeaderPoll <= 0 {
		cfg.LeaderPoll = DefaultReapInterval
	}
	if cfg.Leader == nil {
		cfg.Leader = func() (int64, bool) { return 0, true }
	}
	return &Retention{service: service{name: "retention"}, cfg: cfg}, nil
}

// Start runs the cleanup in the background until ctx ends or Stop; the
// first round runs at once if this node leads.
func (r *Retention) Start(ctx context.Context) error { return r.start(ctx, r.loop) }

// Stop stops the cleanup and waits for it. It is idempotent.
func (r *Retention) Stop() { r.stop() }

func (r *Retention) loop(ctx context.Context) {
	c := r.cfg.Clock
	next := c.Now()
	for {
		if _, leading := r.cfg.Leader(); leading {
			if now := c.Now(); !now.Before(next) {
				r.runOnce(ctx)
				next = now.Add(r.cfg.Interval)
			}
		}
		if !sleep(ctx, c, r.cfg.LeaderPoll, nil) {
			return
		}
	}
}

// runOnce deletes finished tasks past their retention, in batches, under
// the leadership's term, and returns how many it deleted. Like
// Reaper.runOnce it leaves the leadership question to the loop and the
// fencing to the store.
func (r *Retention) runOnce(ctx context.Context) int {
	if r.cfg.Audit != nil && r.cfg.AuditRetention > 0 {
		r.cleanAudit(ctx)
	}
	r.cleanEvents(ctx)
	r.pruneWorkers(ctx)
	term, _ := r.cfg.Leader()
	total := 0
	for {
		n, err := r.cfg.Store.TaskCleanup(ctx, store.TaskCleanupParams{Now: r.cfg.Clock.Now(), Limit: r.cfg.BatchSize, Term: term})
		total += n
		switch {
		case errors.Is(err, store.ErrFenced):
			r.cfg.Logger.Warn("dispatch: retention cleanup refused: this node no longer leads", "term", term, "err", err)
			return total
		case err != nil:
			if ctx.Err() == nil {
				r.cfg.Logger.Error("dispatch: retention cleanup", "err", err)
			}
			return total
		}
		if n < r.cfg.BatchSize {
			if total > 0 {
				r.cfg.Logger.Info("dispatch: deleted finished tasks past their retention", "tasks", total)
			}
			return total
		}
	}
}

// cleanAudit deletes the audit records older than AuditRetention, in
// batches. Deleting what is past its retention is idempotent, so it needs
// no fencing.
func (r *Retention) cleanAudit(ctx context.Context) {
	before := r.cfg.Clock.Now().Add(-r.cfg.AuditRetention)
	total := 0
	for {
		n, err := r.cfg.Audit.AuditCleanup(ctx, before, r.cfg.BatchSize)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Error("dispatch: audit log cleanup", "err", err)
			}
			return
		}
		if n < r.cfg.BatchSize {
			if total > 0 {
				r.cfg.Logger.Info("dispatch: deleted audit records past their retention", "records", total)
			}
			return
		}
	}
}

// cleanEvents deletes the events older than EventRetention, in batches,
// and returns how many it deleted. Like cleanAudit it needs no fencing:
// deleting what is past its retention is idempotent.
func (r *Retention) cleanEvents(ctx context.Context) int {
	if r.cfg.Events == nil || r.cfg.EventRetention <= 0 {
		return 0
	}
	before := r.cfg.Clock.Now().Add(-r.cfg.EventRetention)
	total := 0
	for {
		n, err := r.cfg.Events.EventCleanup(ctx, before, r.cfg.BatchSize)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Error("dispatch: event retention", "err", err)
			}
			return total
		}
		if n < r.cfg.BatchSize {
			if total > 0 {
				r.cfg.Logger.Debug("dispatch: deleted events past the event retention", "events", total)
			}
			return total
		}
	}
}

// pruneWorkers deletes the workers gone longer than WorkerRetention, in
// batches, and returns how many it deleted. Like cleanAudit it needs no
// fencing: deleting what is past its retention is idempotent.
func (r *Retention) pruneWorkers(ctx context.Context) int {
	if r.cfg.Workers == nil || r.cfg.WorkerRetention <= 0 {
		return 0
	}
	before := r.cfg.Clock.Now().Add(-r.cfg.WorkerRetention - store.WorkerLiveness)
	total := 0
	for {
		n, err := r.cfg.Workers.WorkerPrune(ctx, store.WorkerPruneParams{SeenBefore: before, Limit: r.cfg.BatchSize})
		total += n
		if err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Error("dispatch: worker retention", "err", err)
			}
			return total
		}
		if n < r.cfg.BatchSize {
			if total > 0 {
				r.cfg.Logger.Info("dispatch: pruned workers gone longer than the retention", "workers", total)
			}
			return total
		}
	}
}
