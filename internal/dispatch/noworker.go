package dispatch

import (
	"context"
	"errors"
	"log/slog"
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

// NoWorkerStore is what the no-worker alarm reads: the queue per kind,
// the claimable pinned tasks and the workers with their status.
type NoWorkerStore interface {
	// Stats: see store.Store.
	Stats(ctx context.Context, now time.Time) (store.Stats, error)
	// TaskPinnedWaiting: see store.Store.
	TaskPinnedWaiting(ctx context.Context, now time.Time) ([]store.PinnedWaiting, error)
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
//
// Pinned tasks count the same way for the workers they name: when
// claimable tasks of a kind are pinned to workers none of which is active
// serving the kind, the kind is in alarm for those workers too (even if
// other workers serve it), with its own kind.no_worker and
// kind.worker_back naming them; it ends when one of them serves the kind
// or the tasks are no longer claimable.
type NoWorker struct {
	service
	cfg NoWorkerConfig // immutable after NewNoWorker

	mu      sync.Mutex             // guards the fields below
	since   map[alarmKey]time.Time // alarms → since when no worker served their ready tasks
	emitted map[alarmKey]bool      // alarms whose kind.no_worker this node emitted (as leader)
}

// alarmKey names one alarm: a kind, and for pinned tasks the workers they
// name (sorted, comma-separated; "" for the kind's alarm).
type alarmKey struct {
	kind    string
	workers string
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
		since: map[alarmKey]time.Time{}, emitted: map[alarmKey]bool{},
	}, nil
}

// Start runs the alarm in the background until ctx ends or Stop.
func (a *NoWorker) Start(ctx context.Context) error { return a.start(ctx, a.loop) }

// Stop stops the alarm and waits for it. It is idempotent.
func (a *NoWorker) Stop() { a.stop() }

func (a *NoWorker) loop(ctx context.Context) {
	for {
		began := time.Now() // the read's cost, on the real clock
		if err := a.runOnce(ctx); err != nil && ctx.Err() == nil {
			a.cfg.Logger.Warn("no-worker alarm", "err", err)
		}
		if !sleep(ctx, a.cfg.Clock, a.pause(time.Since(began)), nil) {
			return
		}
	}
}

// pause is the wait before the next read, when the last one took took:
// Interval, or ten times took when that is longer, but never more than
// half the alarm delay (nor less than Interval). Stats counts every task,
// so with a deep queue a read is long (1.27 s with 1,000,000 tasks on
// PostgreSQL): the alarm then asks at most about a tenth of a core of the
// store instead of a read every Interval, and still goes off in time.
func (a *NoWorker) pause(took time.Duration) time.Duration {
	return max(a.cfg.Interval, min(10*took, a.cfg.After/2))
}

// Since returns since when kind has had ready tasks and no worker, when it
// is in alarm (for all its workers or for those of pinned tasks; the
// earliest).
func (a *NoWorker) Since(kind string) (time.Time, bool) {
	t, ok := a.Alarms()[kind]
	return t, ok
}

// Alarms returns the kinds in alarm, by name, with since when.
func (a *NoWorker) Alarms() map[string]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return byKind(a.since)
}

// byKind folds alarms into their kinds, each with its earliest time.
func byKind(alarms map[alarmKey]time.Time) map[string]time.Time {
	out := map[string]time.Time{}
	for k, t := range alarms {
		if cur, ok := out[k.kind]; !ok || t.Before(cur) {
			out[k.kind] = t
		}
	}
	return out
}

// runOnce reads the store once and updates the alarm of every kind.
func (a *NoWorker) runOnce(ctx context.Context) error {
	now := a.cfg.Clock.Now()
	stats, err := a.cfg.Store.Stats(ctx, now)
	if err != nil {
		return err
	}
	pinned, err := a.cfg.Store.TaskPinnedWaiting(ctx, now)
	if err != nil {
		return err
	}
	workers, err := a.cfg.Store.WorkerList(ctx, now)
	if err != nil {
		return err
	}
	live, lastSeen := workerCoverage(workers)
	want := a.alarmsDue(stats, live, lastSeen, now)
	a.pinnedDue(want, stats, pinned, workers, now)
	served := func(k alarmKey) bool {
		if k.workers == "" {
			return live[k.kind]
		}
		return anyServes(workers, strings.Split(k.workers, ","), k.kind)
	}
	_, leading := a.cfg.Leader()
	events, changed := a.update(want, served, leading, now)
	a.publish(events, changed, byKind(want))
	return nil
}

// anyServes reports whether one of ids is an active worker serving kind.
func anyServes(workers []rota.Worker, ids []string, kind string) bool {
	for _, w := range workers {
		if w.Status == rota.WorkerActive && slices.Contains(ids, w.ID) && slices.Contains(w.Kinds, kind) {
			return true
		}
	}
	return false
}

// pinnedDue adds to want the alarms of pinned tasks: for each group of
// claimable tasks of an unpaused kind pinned to the same workers, none of
// which is active serving the kind, for at least After since the group's
// oldest task was ready or one of its workers last served the kind,
// whichever is later. A kind already in alarm for all its workers covers
// its pinned tasks.
func (a *NoWorker) pinnedDue(want map[alarmKey]time.Time, stats store.Stats, pinned []store.PinnedWaiting, workers []rota.Worker, now time.Time) {
	paused := map[string]bool{}
	for _, ks := range stats.Kinds {
		paused[ks.Kind] = ks.Paused
	}
	for _, g := range pinned {
		if paused[g.Kind] || len(g.WorkerIDs) == 0 {
			continue
		}
		if _, ok := want[alarmKey{kind: g.Kind}]; ok || anyServes(workers, g.WorkerIDs, g.Kind) {
			continue
		}
		since := g.Oldest
		for _, w := range workers {
			if slices.Contains(g.WorkerIDs, w.ID) && slices.Contains(w.Kinds, g.Kind) && w.LastSeen.After(since) {
				since = w.LastSeen
			}
		}
		if now.Sub(since) >= a.cfg.After {
			want[alarmKey{kind: g.Kind, workers: strings.Join(g.WorkerIDs, ",")}] = since.UTC()
		}
	}
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
func (a *NoWorker) alarmsDue(stats store.Stats, live map[string]bool, lastSeen map[string]time.Time, now time.Time) map[alarmKey]time.Time {
	want := map[alarmKey]time.Time{}
	for _, ks := range stats.Kinds {
		if ks.Paused || ks.OldestWaitingAge <= 0 || live[ks.Kind] {
			continue
		}
		since := now.Add(-ks.OldestWaitingAge)
		if seen := lastSeen[ks.Kind]; seen.After(since) {
			since = seen
		}
		if now.Sub(since) >= a.cfg.After {
			want[alarmKey{kind: ks.Kind}] = since.UTC()
		}
	}
	return want
}

// update makes want the alarms on and returns the events to emit (a
// leader emits once per alarm, and when a worker came back to an alarm it
// emitted: served) and the kinds whose alarm began or ended.
func (a *NoWorker) update(want map[alarmKey]time.Time, served func(alarmKey) bool, leading bool, now time.Time) (events []rota.Event, changed []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	before := byKind(a.since)
	for k, since := range want {
		a.since[k] = since
		if leading && !a.emitted[k] {
			a.emitted[k] = true
			msg := "no live worker serves this kind since " + since.Format(time.RFC3339)
			if k.workers != "" {
				msg = "no live worker among " + k.workers + " (named by pinned tasks) serves this kind since " + since.Format(time.RFC3339)
			}
			events = append(events, rota.Event{Type: rota.EventKindNoWorker, Kind: k.kind, Time: now, Message: msg})
		}
	}
	for k := range a.since {
		if _, ok := want[k]; ok {
			continue
		}
		delete(a.since, k)
		if a.emitted[k] && served(k) {
			msg := "a worker serves this kind again"
			if k.workers != "" {
				msg = "a worker among " + k.workers + " (named by pinned tasks) serves this kind again"
			}
			events = append(events, rota.Event{Type: rota.EventKindWorkerBack, Kind: k.kind, Time: now, Message: msg})
		}
		delete(a.emitted, k)
	}
	after := byKind(a.since)
	for k := range after {
		if _, ok := before[k]; !ok {
			changed = append(changed, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			changed = append(changed, k)
		}
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
		return strings.Compare(string(x.Type)+x.Kind+x.Message, string(y.Type)+y.Kind+y.Message)
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
