// Package dispatch hands tasks to workers. It wraps the store's mutating
// task operations so that every change that can make work claimable wakes
// the workers waiting for it (tasks.go), and it composes the background
// services of the queue, one per file, each with a Config, Start, an
// idempotent Stop and a runOnce its tests call directly:
//
//   - claims.go, waiters.go: long-poll claims and their wake-ups;
//   - handoff.go, between.go: a lone submit's task started with its insert
//     for a claim asleep, or for a worker's box (a claim looking at the
//     store, or on its way);
//   - listener.go: wake-ups from other nodes (store notifications);
//   - due.go: the timer of delayed tasks;
//   - reaper.go: the lease reaper (a leader duty);
//   - retention.go: the retention cleanup (a leader duty);
//   - noworker.go: the no-worker alarm (evaluated on every node, emitted by the leader);
//   - push.go: push dispatch to registered HTTP workers, with their health
//     checks (a leader duty; the server composes it, dialing through the
//     outbound guard);
//   - backoff.go: the retry backoff (no loop).
//
// The leader duties run only while Config.Leader says this node leads, and
// their writes carry its fencing term: the store refuses them once the
// term is no longer current (store.ErrFenced).
//
// Long-poll claims register a waiter before they look at the store, so a
// submit that lands between the look and the sleep is never missed. A
// submit of n tasks wakes n waiters of that kind (not all of them: no
// thundering herd); changes whose beneficiary is unknown (pinned tasks,
// resumed kinds, expired leases) wake every waiter of the kind. A claim
// that takes only tasks pinned to its worker (ClaimRequest.PinnedOnly: the
// HTTP executor) is never one of the n a submit of unpinned tasks wakes,
// so it cannot swallow a wake-up meant for a worker. A slow
// safety poll bounds the damage of a missed signal (e.g. a task written by
// another node).
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
)

// Defaults of Config not shared with a service's own config.
const (
	DefaultMaxWait = 60 * time.Second
)

// Config configures a Dispatcher. Zero values mean the documented defaults.
type Config struct {
	Store  store.Store
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	IDs    *rota.IDGenerator

	// BackoffBase and BackoffMax shape the retry delay after the nth failed
	// run: min(BackoffBase·2^(n−1), BackoffMax), plus up to 20% jitter.
	// Defaults DefaultBackoffBase (1s) and DefaultBackoffMax (1h).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxWait caps a claim's long-poll wait (default DefaultMaxWait, 60s).
	MaxWait time.Duration
	// SafetyPoll is how often a waiting claim looks again without being
	// woken (default DefaultSafetyPoll, 2s); a fallback only.
	SafetyPoll time.Duration
	// ReapInterval is the longest the reaper sleeps between looks for
	// expired leases (default DefaultReapInterval, 500ms); it wakes earlier
	// for a known expiry.
	ReapInterval time.Duration
	// CleanupInterval is how often the leader deletes finished tasks past
	// their kind's retention (default DefaultCleanupInterval, 1 minute).
	CleanupInterval time.Duration
	// AuditRetention, when positive, is how long the audit log keeps its
	// records: the retention cleanup deletes older ones too.
	AuditRetention time.Duration
	// EventRetention, when positive, is how long the event log keeps its
	// events: the retention cleanup deletes older ones too.
	EventRetention time.Duration
	// WorkerRetention is how long a worker no longer seen (lost, or
	// stopped) stays listed before the leader prunes it, at the cleanup
	// interval (default DefaultWorkerRetention, 24h).
	WorkerRetention time.Duration
	// Jitter returns a number in [0,1); default math/rand/v2.
	Jitter func() float64
	// Leader, when set, is asked before each round of leader-only duties
	// (the reaper, retention cleanup); it must answer from a lease it knows
	// is still its own, with the fencing term its duties' writes carry.
	// Nil: SetLeader decides (a new dispatcher leads), unfenced (term 0).
	Leader LeaderFunc
	// NoWorkerAfter is how long a kind's ready tasks may wait with no live
	// worker of the kind before the no-worker alarm (default
	// DefaultNoWorkerAfter, 30s); NoWorkerInterval how often it looks
	// (default DefaultNoWorkerInterval, 5s).
	NoWorkerAfter    time.Duration
	NoWorkerInterval time.Duration
	// NoWorkerChanged, when set, is told of every kind whose no-worker
	// alarm went on or off (metrics); it must not block.
	NoWorkerChanged func(kind string, on bool)
	// Events receives one event per task or run state change made through
	// the dispatcher, in order (the caller assigns IDs). It must not block.
	// Nil: no events.
	Events func(rota.Event)
	// EventsAppended, when set, hears the store's notifications that
	// another node appended to the event log (from the listener's
	// goroutine; it must not block).
	EventsAppended func()
}

// Dispatcher coordinates claims and wake-ups. Create it with New, start its
// services with Start, and Stop it before closing the store.
type Dispatcher struct {
	// Immutable after New.
	cfg       Config
	backoff   *Backoff
	delay     func(n int) time.Duration // backoff.Delay, bound once (a report's stamp allocated it)
	waiters   *waiters                  // long-poll claims (own lock)
	due       *DueTimer
	reaper    *Reaper
	retention *Retention
	listener  *Listener
	noWorker  *NoWorker

	leader atomic.Bool // SetLeader's answer: runs the leader-only duties

	beats beatWaiters // heartbeats held open by HeartbeatWait; guarded by its own mutex

	pushKick chan struct{} // wakes the push dispatcher (push.go); buffered 1
	pushMu   sync.Mutex    // push claims vs deregistrations (push.go)

	quit     chan struct{} // closed by Stop: waiting claims return at once
	stopOnce sync.Once

	// The release timers of runs handed to the workers' boxes (between.go):
	// Stop waits for them.
	between        sync.WaitGroup
	betweenMu      sync.Mutex // guards betweenStopped and between's Add
	betweenStopped bool
}

// New returns a Dispatcher; Start must be called to run its services.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("dispatch: nil store")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.IDs == nil {
		cfg.IDs = &rota.IDGenerator{}
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.SafetyPoll <= 0 {
		cfg.SafetyPoll = DefaultSafetyPoll
	}
	if cfg.WorkerRetention <= 0 {
		cfg.WorkerRetention = DefaultWorkerRetention
	}
	d := &Dispatcher{
		cfg:     cfg,
		backoff: NewBackoff(BackoffConfig{Base: cfg.BackoffBase, Max: cfg.BackoffMax, Jitter: cfg.Jitter}),
		waiters: newWaiters(),
		quit:    make(chan struct{}),
	}
	d.delay = d.backoff.Delay
	d.pushKick = make(chan struct{}, 1)
	d.leader.Store(true) // alone, a dispatcher runs every duty
	var err error
	if d.due, err = NewDueTimer(DueConfig{
		Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, SafetyPoll: cfg.SafetyPoll,
		Wake: func(kind string) { d.Notify(kind, -1) }, Kinds: d.waiters.kinds,
	}); err != nil {
		return nil, err
	}
	if d.reaper, err = NewReaper(ReaperConfig{
		Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, Interval: cfg.ReapInterval,
		Backoff: d.backoff.Delay, Leader: d.leading, Expired: d.expired,
	}); err != nil {
		return nil, err
	}
	if d.retention, err = NewRetention(RetentionConfig{
		Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, Interval: cfg.CleanupInterval,
		LeaderPoll: cfg.ReapInterval, Leader: d.leading, Audit: cfg.Store, AuditRetention: cfg.AuditRetention,
		Events: cfg.Store, EventRetention: cfg.EventRetention,
		Workers: cfg.Store, WorkerRetention: cfg.WorkerRetention,
	}); err != nil {
		return nil, err
	}
	if d.noWorker, err = NewNoWorker(NoWorkerConfig{
		Store: cfg.Store, Clock: cfg.Clock, Logger: cfg.Logger, After: cfg.NoWorkerAfter,
		Interval: cfg.NoWorkerInterval, Leader: d.leading, Events: d.emit, Changed: cfg.NoWorkerChanged,
	}); err != nil {
		return nil, err
	}
	if d.listener, err = NewListener(ListenerConfig{Store: cfg.Store, Logger: cfg.Logger, Handle: d.remote}); err != nil {
		return nil, err
	}
	return d, nil
}

// Start loads the due times of delayed tasks and starts the services (the
// due timer, the reaper, the retention cleanup and, with a store that
// notifies, the listener); they run until ctx ends or Stop.
func (d *Dispatcher) Start(ctx context.Context) error {
	kinds, err := d.cfg.Store.KindList(ctx)
	if err != nil {
		return fmt.Errorf("dispatch: start: %w", err)
	}
	for _, k := range kinds {
		d.due.Refresh(ctx, k.Name)
	}
	for _, start := range []func(context.Context) error{d.due.Start, d.reaper.Start, d.retention.Start, d.listener.Start, d.noWorker.Start} {
		if err := start(ctx); err != nil {
			d.Stop()
			return err
		}
	}
	return nil
}

// Stop makes waiting claims return empty at once and stops the services,
// waiting for them. It is idempotent.
func (d *Dispatcher) Stop() {
	d.stopOnce.Do(func() { close(d.quit) })
	d.betweenMu.Lock()
	d.betweenStopped = true
	d.betweenMu.Unlock()
	d.between.Wait() // released the runs no claim collected
	d.noWorker.Stop()
	d.listener.Stop()
	d.retention.Stop()
	d.reaper.Stop()
	d.due.Stop()
}

// SetLeader tells the dispatcher whether this node runs the leader-only
// duties (the lease reaper, the retention cleanup). A new dispatcher is
// leader: a cluster member sets it to false until it wins the election.
func (d *Dispatcher) SetLeader(leader bool) { d.leader.Store(leader) }

// leading is the LeaderFunc of the leader-only services: SetLeader and
// Config.Leader must both agree.
func (d *Dispatcher) leading() (term int64, ok bool) {
	ok = d.leader.Load()
	if d.cfg.Leader != nil {
		var leads bool
		term, leads = d.cfg.Leader()
		ok = ok && leads
	}
	return term, ok
}

// Backoff is the delay before the retry that follows the nth failed run.
func (d *Dispatcher) Backoff(n int) time.Duration { return d.backoff.Delay(n) }

// ReapOnce runs one round of the lease reaper now, whether or not this node
// leads (the store fences a deposed leader's round), and returns how long
// the reaper would sleep next. Tests call it directly.
func (d *Dispatcher) ReapOnce(ctx context.Context) time.Duration { return d.reaper.runOnce(ctx) }

// CleanupOnce runs one round of the retention cleanup now (fenced like
// ReapOnce) and returns how many tasks it deleted.
func (d *Dispatcher) CleanupOnce(ctx context.Context) int { return d.retention.runOnce(ctx) }

// NoWorkerSince returns since when kind's ready tasks have had no live
// worker, when the kind is in no-worker alarm (see NoWorker).
func (d *Dispatcher) NoWorkerSince(kind string) (time.Time, bool) { return d.noWorker.Since(kind) }

// NoWorkerAlarms returns the kinds in no-worker alarm, with since when.
func (d *Dispatcher) NoWorkerAlarms() map[string]time.Time { return d.noWorker.Alarms() }

// NoWorkerOnce evaluates the no-worker alarm now (tests).
func (d *Dispatcher) NoWorkerOnce(ctx context.Context) error { return d.noWorker.runOnce(ctx) }

// PruneWorkersOnce deletes now the workers gone longer than the worker
// retention (part of each retention round) and returns how many it
// deleted.
func (d *Dispatcher) PruneWorkersOnce(ctx context.Context) int { return d.retention.pruneWorkers(ctx) }

// expired follows a batch of lease expiries: the tasks' events, and
// wake-ups and due times of the kinds made claimable.
func (d *Dispatcher) expired(ctx context.Context, res store.RunExpireResult) {
	for _, id := range res.Tasks {
		d.emitTaskByID(ctx, id)
	}
	for _, k := range res.Kinds {
		d.Notify(k, -1)
		d.due.Refresh(ctx, k)
	}
}

// remoteWake is how many local waiters a notification from the store wakes:
// a hint that work exists, not a count of it.
const remoteWake = 4

// remote handles a notification from another node (or this one, echoed by
// the store): wake some waiters now, or note the due time.
func (d *Dispatcher) remote(n store.Notification) {
	if n.Events {
		if d.cfg.EventsAppended != nil {
			d.cfg.EventsAppended()
		}
		return
	}
	if n.RunAt.After(d.cfg.Clock.Now()) {
		d.due.Note(n.Kind, n.RunAt)
		return
	}
	// The notification does not say whether the task is pinned: wake the
	// pinned-only waiters too (there are few: the HTTP executors).
	d.waiters.notify(n.Kind, remoteWake, true)
}

func (d *Dispatcher) newRunID() string { return d.cfg.IDs.New(d.cfg.Clock.Now()) }

func (d *Dispatcher) runIDBlock(n int) (string, uint64) {
	return d.cfg.IDs.NewBlock(d.cfg.Clock.Now(), n)
}

// NewID returns a new task id.
func (d *Dispatcher) NewID() string { return d.cfg.IDs.New(d.cfg.Clock.Now()) }

// Now is the dispatcher's clock reading.
func (d *Dispatcher) Now() time.Time { return d.cfg.Clock.Now() }
