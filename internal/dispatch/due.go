package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/rotahq/rota/internal/clock"
)

// DefaultSafetyPoll is DueConfig.SafetyPoll's default (and the default of
// Config.SafetyPoll).
const DefaultSafetyPoll = 2 * time.Second

// DueStore is what the delayed-task timer reads from the store.
type DueStore interface {
	// TaskNextRunAt: see store.Store.
	TaskNextRunAt(ctx context.Context, kinds []string, now time.Time) (time.Time, bool, error)
}

// DueConfig configures a DueTimer. Zero values mean the defaults.
type DueConfig struct {
	Store  DueStore     // required
	Wake   func(string) // required: wakes every waiter of a kind whose tasks came due
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	// SafetyPoll is the longest the timer sleeps; on waking without a known
	// due time it reloads the due times of Kinds, to pick up delayed tasks
	// written elsewhere (default DefaultSafetyPoll).
	SafetyPoll time.Duration
	// Kinds returns the kinds the safety poll reloads (the kinds that have
	// waiting claims). Nil: none.
	Kinds func() []string
}

// DueTimer is the delayed-task timer: one timer sleeps until the earliest
// known due time of a delayed task, then wakes that kind's waiters and
// reloads its next due time from the store.
type DueTimer struct {
	service
	cfg  DueConfig     // immutable after NewDueTimer
	kick chan struct{} // buffered 1: the earliest due time may have changed

	mu  sync.Mutex           // guards due
	due map[string]time.Time // earliest known RunAt of delayed tasks by kind
}

// NewDueTimer returns a DueTimer; Start runs it.
func NewDueTimer(cfg DueConfig) (*DueTimer, error) {
	if cfg.Store == nil || cfg.Wake == nil {
		return nil, errors.New("dispatch: due timer: Store and Wake are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.SafetyPoll <= 0 {
		cfg.SafetyPoll = DefaultSafetyPoll
	}
	if cfg.Kinds == nil {
		cfg.Kinds = func() []string { return nil }
	}
	return &DueTimer{
		service: service{name: "due timer"},
		cfg:     cfg,
		kick:    make(chan struct{}, 1),
		due:     map[string]time.Time{},
	}, nil
}

// Start runs the timer in the background until ctx ends or Stop.
func (t *DueTimer) Start(ctx context.Context) error { return t.start(ctx, t.loop) }

// Stop stops the timer and waits for it. It is idempotent.
func (t *DueTimer) Stop() { t.stop() }

// Note records that kind has a task due at at.
func (t *DueTimer) Note(kind string, at time.Time) {
	t.mu.Lock()
	cur, ok := t.due[kind]
	changed := !ok || at.Before(cur)
	if changed {
		t.due[kind] = at
	}
	t.mu.Unlock()
	if changed {
		select {
		case t.kick <- struct{}{}:
		default:
		}
	}
}

// Refresh reloads the next due time of kind from the store.
func (t *DueTimer) Refresh(ctx context.Context, kind string) {
	c := t.cfg.Clock
	next, ok, err := t.cfg.Store.TaskNextRunAt(ctx, []string{kind}, c.Now())
	if err != nil {
		if ctx.Err() == nil {
			t.cfg.Logger.Warn("dispatch: next due time", "kind", kind, "err", err)
		}
		// Look again after a safety poll rather than spin on a due time
		// that stays in the past.
		t.mu.Lock()
		if cur, have := t.due[kind]; have && !cur.After(c.Now()) {
			t.due[kind] = c.Now().Add(t.cfg.SafetyPoll)
		}
		t.mu.Unlock()
		return
	}
	now := c.Now()
	t.mu.Lock()
	// A due time noted while the store was being read may be earlier than
	// what the read saw: keep it if it is still ahead (a stale one only
	// costs a spurious wake-up).
	if cur, have := t.due[kind]; have && cur.After(now) && (!ok || cur.Before(next)) {
		next, ok = cur, true
	}
	if ok {
		t.due[kind] = next
	} else {
		delete(t.due, kind)
	}
	t.mu.Unlock()
}

// refreshAll reloads the due times of the kinds with waiters.
func (t *DueTimer) refreshAll(ctx context.Context) {
	for _, k := range t.cfg.Kinds() {
		t.Refresh(ctx, k)
	}
}

// runOnce wakes the waiters of every kind due now and reloads their next
// due times. It returns the earliest due time still ahead (zero if none
// is known) and whether any kind was due.
func (t *DueTimer) runOnce(ctx context.Context) (next time.Time, fired bool) {
	t.mu.Lock()
	now := t.cfg.Clock.Now()
	var dueKinds []string
	for k, at := range t.due {
		if !at.After(now) {
			dueKinds = append(dueKinds, k)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	t.mu.Unlock()
	for _, k := range dueKinds {
		t.cfg.Wake(k)
		t.Refresh(ctx, k)
	}
	return next, len(dueKinds) > 0
}

// loop sleeps until the earliest due time (at most SafetyPoll) or a Note
// that moves it earlier, and runs runOnce.
func (t *DueTimer) loop(ctx context.Context) {
	c := t.cfg.Clock
	for {
		next, fired := t.runOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if fired {
			continue // due times were reloaded: look again before sleeping
		}
		d := t.cfg.SafetyPoll
		if !next.IsZero() {
			d = min(d, next.Sub(c.Now()))
		}
		timer := c.NewTimer(d)
		select {
		case <-timer.C():
			if next.IsZero() || c.Now().Before(next) {
				// Safety poll: pick up delayed tasks written elsewhere.
				t.refreshAll(ctx)
			}
		case <-t.kick:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
	}
}
