// Package dispatch hands tasks to workers. It wraps the store's mutating
// task operations so that every change that can make work claimable wakes
// the workers waiting for it, and it runs the two timers of the queue: the
// due time of delayed tasks and the lease reaper.
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
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/clock"
	"github.com/rotahq/rota/internal/store"
)

// Config configures a Dispatcher. Zero values mean the documented defaults.
type Config struct {
	Store  store.Store
	Clock  clock.Clock  // default clock.Real
	Logger *slog.Logger // default slog.Default()
	IDs    *rota.IDGenerator

	// BackoffBase and BackoffMax shape the retry delay after the nth failed
	// run: min(BackoffBase·2^(n−1), BackoffMax), plus up to 20% jitter.
	// Defaults 1s and 1h.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxWait caps a claim's long-poll wait (default 60s).
	MaxWait time.Duration
	// SafetyPoll is how often a waiting claim looks again without being
	// woken (default 2s); a fallback only.
	SafetyPoll time.Duration
	// ReapInterval is the longest the reaper sleeps between looks for
	// expired leases (default 500ms); it wakes earlier for a known expiry.
	ReapInterval time.Duration
	// CleanupInterval is how often the leader deletes finished tasks past
	// their kind's retention (default 1 minute).
	CleanupInterval time.Duration
	// Jitter returns a number in [0,1); default math/rand/v2.
	Jitter func() float64
	// Leader, when set, is asked before each round of leader-only duties
	// (the reaper, retention cleanup); it must answer from a lease it knows
	// is still its own. Nil: SetLeader decides (a new dispatcher leads).
	Leader func() bool
	// Events receives one event per task or run state change made through
	// the dispatcher, in order (the caller assigns IDs). It must not block.
	// Nil: no events.
	Events func(rota.Event)
}

// Dispatcher coordinates claims and wake-ups. Create it with New, start its
// timers with Start, and Stop it before closing the store.
type Dispatcher struct {
	cfg Config // immutable after New

	mu      sync.Mutex           // guards the fields below
	waiters map[string][]*waiter // by kind, oldest first
	due     map[string]time.Time // earliest known RunAt of delayed tasks by kind
	dueKick chan struct{}        // tells the due loop that due changed
	stopped bool

	leader atomic.Bool // runs the leader-only duties (the reaper)

	beats beatWaiters // heartbeats held open by HeartbeatWait; guarded by its own mutex

	quit chan struct{}  // closed by Stop: waiting claims return at once
	wg   sync.WaitGroup // background loops
	once sync.Once
}

type waiter struct {
	kinds      []string
	pinnedOnly bool          // the claim takes only tasks pinned to its worker
	wake       chan struct{} // buffered 1
}

// New returns a Dispatcher; Start must be called to run its timers.
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
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = time.Hour
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 60 * time.Second
	}
	if cfg.SafetyPoll <= 0 {
		cfg.SafetyPoll = 2 * time.Second
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = 500 * time.Millisecond
	}
	if cfg.CleanupInterval <= 0 {
		cfg.CleanupInterval = time.Minute
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	d := &Dispatcher{
		cfg:     cfg,
		waiters: map[string][]*waiter{},
		due:     map[string]time.Time{},
		dueKick: make(chan struct{}, 1),
		quit:    make(chan struct{}),
	}
	d.leader.Store(true) // alone, a dispatcher runs every duty
	return d, nil
}

// Backoff is the delay before the retry that follows the nth failed run.
func (d *Dispatcher) Backoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	base := float64(d.cfg.BackoffBase) * math.Pow(2, float64(n-1))
	if base > float64(d.cfg.BackoffMax) {
		base = float64(d.cfg.BackoffMax)
	}
	return time.Duration(base * (1 + 0.2*d.cfg.Jitter()))
}

// Start loads the due times of delayed tasks and starts the due-time and
// reaper loops; they run until Stop.
func (d *Dispatcher) Start(ctx context.Context) error {
	kinds, err := d.cfg.Store.KindList(ctx)
	if err != nil {
		return fmt.Errorf("dispatch: start: %w", err)
	}
	for _, k := range kinds {
		d.refreshDue(ctx, k.Name)
	}
	d.wg.Add(2)
	go d.dueLoop()
	go d.reapLoop()
	if d.cfg.Store.SupportsNotify() {
		sctx, cancel := context.WithCancel(context.Background())
		d.wg.Add(2)
		go func() {
			defer d.wg.Done()
			<-d.quit
			cancel()
		}()
		go func() {
			defer d.wg.Done()
			if err := d.cfg.Store.Subscribe(sctx, d.remote); err != nil && sctx.Err() == nil {
				d.cfg.Logger.Error("dispatch: subscribe to store notifications", "err", err)
			}
		}()
	}
	return nil
}

// remoteWake is how many local waiters a notification from the store wakes:
// a hint that work exists, not a count of it.
const remoteWake = 4

// remote handles a notification from another node (or this one, echoed by
// the store): wake some waiters now, or note the due time.
func (d *Dispatcher) remote(n store.Notification) {
	if n.RunAt.After(d.cfg.Clock.Now()) {
		d.noteDue(n.Kind, n.RunAt)
		return
	}
	// The notification does not say whether the task is pinned: wake the
	// pinned-only waiters too (there are few: the HTTP executors).
	d.notify(n.Kind, remoteWake, true)
}

func (d *Dispatcher) isLeader() bool {
	if !d.leader.Load() {
		return false
	}
	return d.cfg.Leader == nil || d.cfg.Leader()
}

// SetLeader tells the dispatcher whether this node runs the leader-only
// duties (the lease reaper). A new dispatcher is leader: a cluster member
// sets it to false until it wins the election.
func (d *Dispatcher) SetLeader(leader bool) { d.leader.Store(leader) }

// Stop makes waiting claims return empty at once and stops the loops. It
// is idempotent.
func (d *Dispatcher) Stop() {
	d.once.Do(func() {
		d.mu.Lock()
		d.stopped = true
		d.mu.Unlock()
		close(d.quit)
	})
	d.wg.Wait()
}

// Notify wakes up to n waiters of kind (all of them when n < 0). A count
// n ≥ 0 stands for n unpinned tasks, which any worker may take: it wakes
// only waiters that can take them, never a PinnedOnly claim. A change that
// may concern pinned tasks must pass n < 0.
func (d *Dispatcher) Notify(kind string, n int) { d.notify(kind, n, false) }

// notify wakes up to n waiters of kind that may take unpinned tasks (all of
// them when n < 0), and with pinned every PinnedOnly waiter as well.
func (d *Dispatcher) notify(kind string, n int, pinned bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.waiters[kind] {
		if w.pinnedOnly && n >= 0 && !pinned || !w.pinnedOnly && n == 0 {
			continue
		}
		select {
		case w.wake <- struct{}{}:
			if !w.pinnedOnly && n > 0 {
				n--
			}
		default: // already woken; it will look again anyway
		}
	}
}

// Waiting returns how many claims wait for work of kind (tests and
// metrics use it).
func (d *Dispatcher) Waiting(kind string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.waiters[kind])
}

func (d *Dispatcher) register(kinds []string, pinnedOnly bool) *waiter {
	w := &waiter{kinds: kinds, pinnedOnly: pinnedOnly, wake: make(chan struct{}, 1)}
	d.mu.Lock()
	for _, k := range kinds {
		d.waiters[k] = append(d.waiters[k], w)
	}
	d.mu.Unlock()
	return w
}

func (d *Dispatcher) unregister(w *waiter) {
	d.mu.Lock()
	for _, k := range w.kinds {
		ws := d.waiters[k]
		if i := slices.Index(ws, w); i >= 0 {
			ws = slices.Delete(ws, i, i+1)
		}
		if len(ws) == 0 {
			delete(d.waiters, k)
		} else {
			d.waiters[k] = ws
		}
	}
	d.mu.Unlock()
}

// ClaimRequest is a worker's request for work.
type ClaimRequest struct {
	WorkerID string
	Address  string
	Kinds    []string
	Max      int
	Wait     time.Duration // long-poll up to this long (capped at MaxWait)
	// PinnedOnly claims only tasks pinned to WorkerID (see
	// store.TaskClaimParams.PinnedOnly): Rota's HTTP executor claims so.
	// Such a claim is woken by changes that may concern pinned tasks, not
	// by the submission of unpinned ones, whose wake-ups go to the workers
	// that can take them.
	PinnedOnly bool
}

// Claim hands out up to r.Max tasks, waiting up to r.Wait for some to become
// claimable. It returns as soon as it has at least one, when the worker must
// drain, when the wait ends, when ctx ends or when the dispatcher stops
// (those last three with an empty result and no error).
func (d *Dispatcher) Claim(ctx context.Context, r ClaimRequest) (store.TaskClaimResult, error) {
	select {
	case <-d.quit:
		// Stopping: grant no more leases.
		return store.TaskClaimResult{}, nil
	default:
	}
	wait := min(r.Wait, d.cfg.MaxWait)
	c := d.cfg.Clock
	end := c.Now().Add(wait)
	var w *waiter
	if wait > 0 {
		w = d.register(r.Kinds, r.PinnedOnly)
		defer d.unregister(w)
	}
	for {
		res, err := d.cfg.Store.TaskClaim(ctx, store.TaskClaimParams{
			WorkerID: r.WorkerID, WorkerAddress: r.Address, Kinds: r.Kinds, Max: r.Max,
			Wait: wait, Now: c.Now(), NewRunID: d.newRunID, PinnedOnly: r.PinnedOnly,
		})
		if err != nil || len(res.Runs) > 0 || res.Drain || wait <= 0 {
			d.emitClaimed(r.WorkerID, res.Runs)
			if len(res.Runs) > 0 && ctx.Err() != nil {
				// The caller went away (a long-poll whose client hung up,
				// a node shutting down) while the claim committed: nobody
				// will run these. Hand them back now rather than let them
				// sit RUNNING until their lease lapses.
				d.releaseAbandoned(context.WithoutCancel(ctx), r.WorkerID, res.Runs)
				return store.TaskClaimResult{}, nil
			}
			return res, err
		}
		left := end.Sub(c.Now())
		if left <= 0 {
			return res, nil
		}
		sleep := min(left, d.cfg.SafetyPoll)
		if !res.RateLimitedUntil.IsZero() {
			// Work waits for a rate token: look again when one is due.
			sleep = min(sleep, max(res.RateLimitedUntil.Sub(c.Now()), time.Millisecond))
		}
		t := c.NewTimer(sleep)
		select {
		case <-w.wake:
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return store.TaskClaimResult{}, nil
		case <-d.quit:
			t.Stop()
			return store.TaskClaimResult{}, nil
		}
		t.Stop()
	}
}

// releaseAbandoned releases runs granted to a claim whose caller is gone:
// they end CANCELED, cost no attempt, and their tasks are claimable again.
func (d *Dispatcher) releaseAbandoned(ctx context.Context, worker string, runs []rota.ClaimedRun) {
	ps := make([]store.RunCompleteParams, len(runs))
	for i, run := range runs {
		ps[i] = store.RunCompleteParams{RunID: run.RunID, WorkerID: worker, Release: true,
			Message: "released: the claim's caller went away before it got the task"}
	}
	_, errs := d.CompleteMany(ctx, ps)
	for i, err := range errs {
		if err != nil {
			// Its lease will lapse and the reaper will take it back.
			d.cfg.Logger.Warn("dispatch: release an abandoned claim", "run", runs[i].RunID, "err", err)
		}
	}
}

func (d *Dispatcher) newRunID() string { return d.cfg.IDs.New(d.cfg.Clock.Now()) }

// NewID returns a new task id.
func (d *Dispatcher) NewID() string { return d.cfg.IDs.New(d.cfg.Clock.Now()) }

// Now is the dispatcher's clock reading.
func (d *Dispatcher) Now() time.Time { return d.cfg.Clock.Now() }

// Submit stores tasks (one transaction) and wakes the workers that can take
// them; delayed tasks set the due timer instead.
func (d *Dispatcher) Submit(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	res, err := d.cfg.Store.TaskInsertMany(ctx, ps)
	if err != nil {
		return nil, err
	}
	now := d.cfg.Clock.Now()
	ready := map[string]int{}
	for _, r := range res {
		if r.Existing {
			continue
		}
		t := r.Task
		d.emit(rota.Event{Type: rota.EventTask, Kind: t.Kind, TaskID: t.ID, Status: t.Status, Time: now, RunAt: t.RunAt})
		switch {
		case t.RunAt.After(now):
			d.noteDue(t.Kind, t.RunAt)
		case len(t.WorkerIDs) > 0:
			ready[t.Kind] = -1
		case ready[t.Kind] >= 0:
			ready[t.Kind] += t.Workers
		}
	}
	for k, n := range ready {
		d.Notify(k, n)
	}
	return res, nil
}

// Complete records a worker's report on its run.
func (d *Dispatcher) Complete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	p.Now = d.cfg.Clock.Now()
	p.Backoff = d.Backoff
	t, err := d.cfg.Store.RunComplete(ctx, p)
	if err != nil {
		d.afterExpiry(err)
		return nil, err
	}
	for _, r := range t.Runs {
		if r.ID == p.RunID {
			d.emit(rota.Event{Type: rota.EventRun, Kind: t.Kind, TaskID: t.ID, RunID: r.ID, WorkerID: r.WorkerID,
				Status: r.Status, Attempt: r.Attempt, Message: r.Message, Time: p.Now})
		}
	}
	d.emitTask(t, p.Now)
	d.afterChange(t)
	return t, nil
}

// completeManyConcurrency bounds the reports of one CompleteMany in flight
// at once: enough to fill the stores' group commits (pgstore groups up to
// 500 reports, sqlitestore 256 by default), few enough that a huge slice
// does not start a goroutine per report.
const completeManyConcurrency = 512

// CompleteMany reports many runs at once. Each report is Complete with its
// params (same store call, events and wake-ups), and the reports run
// concurrently, so that the store's group commit settles them together
// (pgstore and sqlitestore each commit concurrent RunComplete calls in one
// transaction) instead of paying one commit per run. tasks[i] and errs[i]
// answer ps[i], with exactly one of them non-nil; one report's failure
// (rota.ErrLeaseLost, rota.ErrNotFound, ...) does not affect the others.
// ps should name each run once: two reports of one run race, and which
// wins is unspecified.
func (d *Dispatcher) CompleteMany(ctx context.Context, ps []store.RunCompleteParams) (tasks []*rota.Task, errs []error) {
	tasks = make([]*rota.Task, len(ps))
	errs = make([]error, len(ps))
	if len(ps) == 1 {
		tasks[0], errs[0] = d.Complete(ctx, ps[0])
		return tasks, errs
	}
	var (
		next atomic.Int64 // the index of the next report to send
		wg   sync.WaitGroup
	)
	for range min(len(ps), completeManyConcurrency) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ps) {
					return
				}
				tasks[i], errs[i] = d.Complete(ctx, ps[i])
			}
		})
	}
	wg.Wait()
	return tasks, errs
}

// emit hands an event to the configured sink.
func (d *Dispatcher) emit(ev rota.Event) {
	if d.cfg.Events != nil {
		d.cfg.Events(ev)
	}
}

func (d *Dispatcher) emitTask(t *rota.Task, now time.Time) {
	d.emit(rota.Event{Type: rota.EventTask, Kind: t.Kind, TaskID: t.ID, Status: t.Status, Attempt: t.Attempt,
		Message: t.Message, Time: now, RunAt: t.RunAt})
}

func (d *Dispatcher) emitClaimed(worker string, runs []rota.ClaimedRun) {
	if d.cfg.Events == nil {
		return
	}
	now := d.cfg.Clock.Now()
	for _, r := range runs {
		d.emit(rota.Event{Type: rota.EventRun, Kind: r.Kind, TaskID: r.TaskID, RunID: r.RunID, WorkerID: worker,
			Status: rota.StatusRunning, Attempt: r.Attempt, Time: now, RunAt: r.RunAt})
		d.emit(rota.Event{Type: rota.EventTask, Kind: r.Kind, TaskID: r.TaskID, Status: rota.StatusRunning,
			Attempt: r.Attempt, Time: now, RunAt: r.RunAt})
	}
}

// emitTaskByID reads a task and emits its state (after changes the store
// made without returning the task, e.g. lease expiries).
func (d *Dispatcher) emitTaskByID(ctx context.Context, id string) {
	if d.cfg.Events == nil || id == "" {
		return
	}
	t, err := d.cfg.Store.TaskGet(ctx, id)
	if err != nil {
		d.cfg.Logger.Warn("dispatch: read task for event", "task", id, "err", err)
		return
	}
	if n := len(t.Runs); n > 0 {
		// The run that just ended is the latest ended one.
		for i := n - 1; i >= 0; i-- {
			if r := t.Runs[i]; r.Status.Terminal() {
				d.emit(rota.Event{Type: rota.EventRun, Kind: t.Kind, TaskID: t.ID, RunID: r.ID, WorkerID: r.WorkerID,
					Status: r.Status, Attempt: r.Attempt, Message: r.Message, Time: r.EndTime})
				break
			}
		}
	}
	d.emitTask(t, d.cfg.Clock.Now())
}

// Heartbeat renews a run's lease.
func (d *Dispatcher) Heartbeat(ctx context.Context, runID, workerID, message string) (store.RunHeartbeatResult, error) {
	res, err := d.cfg.Store.RunHeartbeat(ctx, store.RunHeartbeatParams{RunID: runID, WorkerID: workerID, Message: message, Now: d.cfg.Clock.Now()})
	d.afterExpiry(err)
	return res, err
}

// afterExpiry wakes the workers of a run that a late heartbeat or report
// expired on the spot: its task may be claimable again, and the reaper will
// not see it.
func (d *Dispatcher) afterExpiry(err error) {
	var ee *store.ExpiredError
	if errors.As(err, &ee) {
		d.emitTaskByID(context.Background(), ee.TaskID)
		d.Notify(ee.Kind, -1)
		d.refreshDue(context.Background(), ee.Kind)
	}
}

// StopTask stops a task.
func (d *Dispatcher) StopTask(ctx context.Context, id, message string) (*rota.Task, error) {
	now := d.cfg.Clock.Now()
	t, err := d.cfg.Store.TaskStop(ctx, store.TaskStopParams{ID: id, Message: message, Now: now})
	if err != nil {
		return nil, err
	}
	d.beats.wakeRuns(t)
	d.emitTask(t, now)
	return t, nil
}

// Update changes a task's options; a new priority or worker list can make
// it claimable by someone new.
func (d *Dispatcher) Update(ctx context.Context, p store.TaskUpdateParams) (*rota.Task, error) {
	p.Now = d.cfg.Clock.Now()
	t, err := d.cfg.Store.TaskUpdate(ctx, p)
	if err != nil {
		return nil, err
	}
	d.beats.wakeRuns(t) // a run's worker may no longer be allowed, or its lease changed
	d.emitTask(t, p.Now)
	d.Notify(t.Kind, -1)
	return t, nil
}

// StopWorker asks a worker to drain and wakes its waiting claim so that it
// learns at once (the dispatcher cannot wake one worker, so the waiters of
// its kinds look again and go back to waiting).
func (d *Dispatcher) StopWorker(ctx context.Context, id string) (*rota.Worker, error) {
	now := d.cfg.Clock.Now()
	w, err := d.cfg.Store.WorkerStop(ctx, id, now)
	if err != nil {
		return nil, err
	}
	d.emit(rota.Event{Type: rota.EventWorker, WorkerID: w.ID, Message: "stop requested", Time: now})
	d.beats.wakeWorker(w.ID)
	for _, k := range w.Kinds {
		d.Notify(k, -1)
	}
	return w, nil
}

// KindUpsert changes a kind's settings; resuming it wakes its workers.
func (d *Dispatcher) KindUpsert(ctx context.Context, p store.KindUpsertParams) (*rota.Kind, error) {
	k, err := d.cfg.Store.KindUpsert(ctx, p)
	if err != nil {
		return nil, err
	}
	msg := "updated"
	switch {
	case p.Paused != nil && *p.Paused:
		msg = "paused"
	case p.Paused != nil:
		msg = "resumed"
	}
	d.emit(rota.Event{Type: rota.EventKind, Kind: k.Name, Message: msg, Time: d.cfg.Clock.Now()})
	d.Notify(k.Name, -1)
	return k, nil
}

// afterChange wakes or schedules workers for a task that may have become
// claimable.
func (d *Dispatcher) afterChange(t *rota.Task) {
	if t == nil || t.Status.Terminal() {
		return
	}
	if t.RunAt.After(d.cfg.Clock.Now()) {
		d.noteDue(t.Kind, t.RunAt)
		return
	}
	d.Notify(t.Kind, -1)
}

// noteDue records that kind has a task due at at.
func (d *Dispatcher) noteDue(kind string, at time.Time) {
	d.mu.Lock()
	cur, ok := d.due[kind]
	changed := !ok || at.Before(cur)
	if changed {
		d.due[kind] = at
	}
	d.mu.Unlock()
	if changed {
		select {
		case d.dueKick <- struct{}{}:
		default:
		}
	}
}

// refreshDue reloads the next due time of kind from the store.
func (d *Dispatcher) refreshDue(ctx context.Context, kind string) {
	next, ok, err := d.cfg.Store.TaskNextRunAt(ctx, []string{kind}, d.cfg.Clock.Now())
	if err != nil {
		d.cfg.Logger.Warn("dispatch: next due time", "kind", kind, "err", err)
		return
	}
	now := d.cfg.Clock.Now()
	d.mu.Lock()
	// A due time noted while the store was being read may be earlier than
	// what the read saw: keep it if it is still ahead (a stale one only
	// costs a spurious wake-up).
	if cur, have := d.due[kind]; have && cur.After(now) && (!ok || cur.Before(next)) {
		next, ok = cur, true
	}
	if ok {
		d.due[kind] = next
	} else {
		delete(d.due, kind)
	}
	d.mu.Unlock()
}

// dueLoop sleeps until the earliest due time, wakes that kind's workers and
// reloads its next due time.
func (d *Dispatcher) dueLoop() {
	defer d.wg.Done()
	c := d.cfg.Clock
	ctx := context.Background()
	for {
		d.mu.Lock()
		now := c.Now()
		var dueKinds []string
		var next time.Time
		for k, at := range d.due {
			if !at.After(now) {
				dueKinds = append(dueKinds, k)
			} else if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		d.mu.Unlock()
		for _, k := range dueKinds {
			d.Notify(k, -1)
			d.refreshDue(ctx, k)
		}
		if len(dueKinds) > 0 {
			continue
		}
		sleep := d.cfg.SafetyPoll
		if !next.IsZero() {
			sleep = min(sleep, next.Sub(now))
		}
		t := c.NewTimer(sleep)
		select {
		case <-t.C():
			if next.IsZero() || c.Now().Before(next) {
				// Safety poll: pick up delayed tasks written elsewhere.
				d.refreshAllDue(ctx)
			}
		case <-d.dueKick:
		case <-d.quit:
			t.Stop()
			return
		}
		t.Stop()
	}
}

func (d *Dispatcher) refreshAllDue(ctx context.Context) {
	d.mu.Lock()
	kinds := make([]string, 0, len(d.waiters))
	for k := range d.waiters {
		kinds = append(kinds, k)
	}
	d.mu.Unlock()
	for _, k := range kinds {
		d.refreshDue(ctx, k)
	}
}

// reapLoop ends runs whose lease or deadline passed and wakes the workers of
// the tasks that became claimable.
func (d *Dispatcher) reapLoop() {
	defer d.wg.Done()
	c := d.cfg.Clock
	nextCleanup := c.Now()
	for {
		sleep := d.cfg.ReapInterval
		if d.isLeader() {
			sleep = d.ReapOnce(context.Background())
			if now := c.Now(); !now.Before(nextCleanup) {
				d.CleanupOnce(context.Background())
				nextCleanup = now.Add(d.cfg.CleanupInterval)
			}
		}
		t := c.NewTimer(sleep)
		select {
		case <-t.C():
		case <-d.quit:
			t.Stop()
			return
		}
	}
}

// CleanupOnce deletes finished tasks past their kind's retention, in
// batches, and returns how many it deleted.
func (d *Dispatcher) CleanupOnce(ctx context.Context) int {
	total := 0
	for {
		n, err := d.cfg.Store.TaskCleanup(ctx, d.cfg.Clock.Now(), 1000)
		total += n
		if err != nil {
			d.cfg.Logger.Error("dispatch: retention cleanup", "err", err)
			return total
		}
		if n < 1000 {
			if total > 0 {
				d.cfg.Logger.Info("dispatch: deleted finished tasks past their retention", "tasks", total)
			}
			return total
		}
	}
}

// ReapOnce expires what is due now and returns how long to sleep before the
// next look. Tests call it directly.
func (d *Dispatcher) ReapOnce(ctx context.Context) time.Duration {
	c := d.cfg.Clock
	for {
		res, err := d.cfg.Store.RunExpire(ctx, store.RunExpireParams{Now: c.Now(), Limit: 500, Backoff: d.Backoff})
		if err != nil {
			d.cfg.Logger.Error("dispatch: expire leases", "err", err)
			return d.cfg.ReapInterval
		}
		for _, id := range res.Tasks {
			d.emitTaskByID(ctx, id)
		}
		for _, k := range res.Kinds {
			d.Notify(k, -1)
			d.refreshDue(ctx, k)
		}
		if res.Expired < 500 {
			break
		}
	}
	next, ok, err := d.cfg.Store.RunNextExpiry(ctx)
	if err != nil || !ok {
		return d.cfg.ReapInterval
	}
	return max(min(next.Sub(c.Now()), d.cfg.ReapInterval), time.Millisecond)
}
