package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
)

// Defaults of NoWorkerConfig.
const (
	// DefaultNoWorkerAfter is how long a kind's tasks may wait with no live
	// worker serving the kind before the alarm goes off.
	DefaultNoWorkerAfter = 30 * time.Second
	// DefaultNoWorkerInterval is how often the alarm reads the store (Stats
	// and WorkerList, on every node): a small fraction of the alarm delay.
	DefaultNoWorkerInterval = 5 * time.Second
)

// NoWorkerStore is what the no-worker alarm reads: the queue per kind and
// the workers with their status.
type NoWorkerStore interface {
	// Stats: see store.Store.
	Stats(ctx context.Context, now time.Time) (store.Stats, error)
	// WorkerList: see store.Store.
	WorkerList(ctx context.Context, now time.Time) ([]rota.Worker, error)
}

// NoWorkerConfig configures a NoWorker alarm. Zero values mean the
// defaults.
type NoWorkerConfig struct {
	Store  NoWorkerStore // required
	Clock  clock.Clock   // default clock.Real
	Logger *slog.Logger  // default slog.Default()
	// After is how long tasks of a kind must have been claimable with no
	// live worker of the kind before the alarm (default
	// DefaultNoWorkerAfter).
	After time.Duration
	// Interval is how often the store is read (default
	// DefaultNoWorkerInterval).
	Interval time.Duration
	// Leader tells whether this node emits the alarm's events: every node
	// evaluates the alarm from the shared store (so each answers the API
	// and its metrics alike), but only the leader emits kind.no_worker and
	// kind.worker_back, so a cluster emits each once. Nil: always.
	Leader LeaderFunc
	// Events receives the alarm's events (must not block). Nil: none.
	Events func(rota.Event)
	// Changed is called with a kind whose alarm went on or off, on every
	// node (metrics). Nil: nothing.
	Changed func(kind string, on bool)
}

// NoWorker is the no-worker alarm. A kind is in alarm when it has tasks
// ready to be claimed (not paused) and no worker serving it is active, and
// that has been so for After: since the later of the oldest ready task's
// ready time and the last sighting of a worker serving the kind. The alarm
// ends when a worker of the kind is active again (kind.worker_back) or no
// task of the kind is ready any more (silently).
type NoWorker struct {
	service
	cfg NoWorkerConfig // immutable after NewNoWorker

	mu      sync.Mutex           // guards the fields below
	since   map[string]time.Time // kinds in alarm → since when no worker served their ready tasks
	emitted map[string]bool      // kinds whose kind.no_worker this node emitted (as leader)
}

// NewNoWorker returns a NoWorker alarm; Start runs it.
func NewNoWorker(cfg NoWorkerConfig) (*NoWorker, error) {
	if cfg.Store == nil {
		return nil, errors.New("dispatch: no-worker alarm: nil store")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.After <= 0 {
		cfg.After = DefaultNoWorkerAfter
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultNoWorkerInterval
	}
	if cfg.Leader == nil {
		cfg.Leader = func() (int64, bool) { return 0, true }
	}
	return &NoWorker{
		service: service{name: "no-worker alarm"}, cfg: cfg,
		since: map[string]time.Time{}, emitted: map[string]bool{},
	}, nil
}

// Start runs the alarm in the background until ctx ends or Stop.
func (a *NoWorker) Start(ctx context.Context) error { return a.start(ctx, a.loop) }

// Stop stops the alarm and waits for it. It is idempotent.
func (a *NoWorker) Stop() { a.stop() }

func (a *NoWorker) loop(ctx context.Context) {
	for {
		if err := a.runOnce(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Warn("no-worker alarm", "err", err)
		}
		if !sleep(ctx, a.cfg.Clock, a.cfg.Interval, nil) {
			return
		}
	}
}

// Since returns since when kind has had ready tasks and no worker, when it
// is in alarm.
func (a *NoWorker) Since(kind string) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.since[kind]
	return t, ok
}

// Alarms returns the kinds in alarm, by name, with since when.
func (a *NoWorker) Alarms() map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.since)
}

// runOnce reads the store once and updates the alarm of every kind.
func (a *NoWorker) runOnce(ctx context.Context) error {
	now := a.cfg.Clock.Now()
	stats, err := a.cfg.Store.Stats(ctx, now)
	if err != nil {
		return err
	}
	workers, err := a.cfg.Store.WorkerList(ctx, now)
	if err != nil {
		return err
	}
	live, lastSeen := workerCoverage(workers)
	want := a.alarmsDue(stats, live, lastSeen, now)
	_, leading := a.cfg.Leader()
	events, changed := a.update(want, live, leading, now)
	a.publish(events, changed, want)
	return nil
}

// workerCoverage returns the kinds some active worker serves, and for
// each kind the last time any worker serving it was seen.
func workerCoverage(workers []rota.Worker) (live map[string]bool, lastSeen map[string]time.Time) {
	live = map[string]bool{}
	lastSeen = map[string]time.Time{}
	for _, w := range workers {
		for _, k := range w.Kinds {
			if w.Status == rota.WorkerActive {
				live[k] = true
			}
			if w.LastSeen.After(lastSeen[k]) {
				lastSeen[k] = w.LastSeen
			}
		}
	}
	return live, lastSeen
}

// alarmsDue returns the kinds that should be in alarm at now, with the
// time since which no worker serves them: unpaused kinds with a waiting
// task and no live worker, for at least After since the oldest waiting
// task arrived or the last worker of the kind was seen, whichever is later.
func (a *NoWorker) alarmsDue(stats store.Stats, live map[string]bool, lastSeen map[string]time.Time, now time.Time) map[string]time.Time {
	want := map[string]time.Time{}
	for _, ks := range stats.Kinds {
		if ks.Paused || ks.OldestWaitingAge <= 0 || live[ks.Kind] {
			continue
		}
		since := now.Add(-ks.OldestWaitingAge)
		if seen := lastSeen[ks.Kind]; seen.After(since) {
			since = seen
		}
		if now.Sub(since) >= a.cfg.After {
			want[ks.Kind] = since.UTC()
		}
	}
	return want
}

// update makes want the kinds in alarm and returns the events to emit (a
// leader emits once per alarm, and when a worker came back to an alarm it
// emitted) and the kinds whose alarm began or ended.
func (a *NoWorker) update(want map[string]time.Time, live map[string]bool, leading bool, now time.Time) (events []rota.Event, changed []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, since := range want {
		if _, ok := a.since[k]; !ok {
			changed = append(changed, k)
		}
		a.since[k] = since
		if leading && !a.emitted[k] {
			a.emitted[k] = true
			events = append(events, rota.Event{Type: rota.EventKindNoWorker, Kind: k, Time: now,
				Message: "no live worker serves this kind since " + since.Format(time.RFC3339)})
		}
	}
	for k := range a.since {
		if _, ok := want[k]; ok {
			continue
		}
		delete(a.since, k)
		changed = append(changed, k)
		if a.emitted[k] && live[k] {
			events = append(events, rota.Event{Type: rota.EventKindWorkerBack, Kind: k, Time: now,
				Message: "a worker serves this kind again"})
		}
		delete(a.emitted, k)
	}
	if !leading {
		clear(a.emitted) // a new leader emits for the kinds still in alarm
	}
	return events, changed
}

// publish hands the events, in a stable order, to Events and the changed
// kinds, sorted, to Changed (on when the kind is now in alarm).
func (a *NoWorker) publish(events []rota.Event, changed []string, want map[string]time.Time) {
	slices.SortFunc(events, func(x, y rota.Event) int {
		return strings.Compare(string(x.Type)+x.Kind, string(y.Type)+y.Kind)
	})
	if a.cfg.Events != nil {
		for _, ev := range events {
			a.cfg.Events(ev)
		}
	}
	if a.cfg.Changed != nil {
		slices.Sort(changed)
		for _, k := range changed {
			_, on := want[k]
			a.cfg.Changed(k, on)
		}
	}
}
