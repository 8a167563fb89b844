package dispatch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Submit stores tasks (one transaction) and wakes the workers that can take
// them; delayed tasks set the due timer instead. A lone task may go
// straight to a claim that sleeps (submitStarted); its answer is the task
// as submitted, waiting, even when its run started with the insert.
func (d *Dispatcher) Submit(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	if len(ps) == 1 && store.Startable(ps[0], d.cfg.Clock.Now()) {
		// A claim of its kind may sleep on this node: hand it the task.
		if res, done, err := d.submitStarted(ctx, ps[0]); done {
			return res, err
		}
	}
	res, err := d.cfg.Store.TaskInsertMany(ctx, ps)
	if err != nil {
		return nil, err
	}
	now := d.cfg.Clock.Now()
	ready := map[string]int{}
	for _, r := range res {
		if r.Existing && !r.Rerun {
			continue
		}
		t := r.Task
		d.emitSubmitted(t, now)
		switch {
		case t.RunAt.After(now):
			d.due.Note(t.Kind, t.RunAt)
		case len(t.WorkerIDs) > 0:
			ready[t.Kind] = -1
		case ready[t.Kind] >= 0:
			ready[t.Kind] += t.Workers
		}
	}
	for k, n := range ready {
		if n > 0 {
			d.waiters.markWaiting(k) // see between.go
		}
		d.Notify(k, n)
	}
	return res, nil
}

// Complete records a worker's report on its run. A failure is retried
// after the dispatcher's backoff unless p.Backoff says otherwise.
func (d *Dispatcher) Complete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	p = d.stamp(p)
	t, err := d.cfg.Store.RunComplete(ctx, p)
	if err != nil {
		d.afterExpiry(ctx, err)
		return nil, err
	}
	d.completed(ctx, p, t)
	return t, nil
}

// stamp gives a report the dispatcher's instant, and its backoff unless
// the report has one.
func (d *Dispatcher) stamp(p store.RunCompleteParams) store.RunCompleteParams {
	p.Now = d.cfg.Clock.Now()
	if p.Backoff == nil {
		p.Backoff = d.delay
	}
	return p
}

// completed announces the report p, which left t: the run's and the
// task's events, the wake-ups its end allows, its dependents. It reads
// only what a store.RunCompleteParams.Brief answer holds.
func (d *Dispatcher) completed(ctx context.Context, p store.RunCompleteParams, t *rota.Task) {
	for _, r := range t.Runs {
		if r.ID == p.RunID {
			ev := rota.Event{Type: rota.EventRun, Kind: t.Kind, TaskID: t.ID, RunID: r.ID, WorkerID: r.WorkerID,
				Status: r.Status, Attempt: r.Attempt, Message: r.Message, Time: p.Now}
			if r.Status == rota.StatusSuccess {
				ev.SetResult(p.Result)
			}
			d.emit(ev)
		}
	}
	d.emitTask(t, p.Now)
	d.afterChange(t)
	d.kickPush() // a push worker's slot may have freed
	if t.Status.Terminal() && len(t.Dependents) > 0 {
		d.afterDeps(ctx, t, p.Now)
	}
}

// maxDependentsWake bounds the dependents afterDeps reads: beyond it, they
// are claimed at their workers' next poll.
const maxDependentsWake = 1000

// afterDeps announces the dependents of the ended task t, which its end
// released (SCHEDULED: their workers are woken) or canceled. The
// follow-up outlives the request, as the change is committed.
func (d *Dispatcher) afterDeps(ctx context.Context, t *rota.Task, now time.Time) {
	ctx = context.WithoutCancel(ctx)
	res, err := d.cfg.Store.TaskList(ctx, store.TaskListParams{DependsOn: t.ID, Limit: maxDependentsWake})
	if err != nil {
		d.cfg.Logger.Warn("read the dependents of an ended task", "task_id", t.ID, "err", err)
		return
	}
	for i := range res.Tasks {
		c := &res.Tasks[i]
		// Released by this end, or canceled by it (not by an earlier one).
		if c.Status != rota.StatusScheduled && (c.Status != rota.StatusCanceled || !c.EndTime.Equal(t.EndTime)) {
			continue
		}
		d.emitTask(c, now)
		d.afterChange(c)
	}
}

// completeManyConcurrency bounds the reports of one CompleteMany in flight
// at once: enough to fill the stores' group commits (pgstore groups up to
// 500 reports, sqlitestore 256 by default), few enough that a huge slice
// does not start a goroutine per report.
const completeManyConcurrency = 512

// manyCompleter is a store that settles a request's reports together
// (pgstore: they join one group commit as one).
type manyCompleter interface {
	RunCompleteMany(ctx context.Context, ps []store.RunCompleteParams) ([]*rota.Task, []error)
}

// CompleteMany reports many runs at once. Each report is Complete with its
// params (same store call, events and wake-ups). A store that takes them
// together (manyCompleter) gets them in one call; otherwise they run
// concurrently, so that the store's group commit settles them together
// (sqlitestore commits concurrent RunComplete calls in one transaction)
// instead of paying one commit per run. tasks[i] and errs[i]
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
	if mc, ok := d.cfg.Store.(manyCompleter); ok {
		ps = slices.Clone(ps)
		for i := range ps {
			ps[i] = d.stamp(ps[i])
		}
		tasks, errs = mc.RunCompleteMany(ctx, ps)
		for i, err := range errs {
			if err != nil {
				d.afterExpiry(ctx, err)
				continue
			}
			d.completed(ctx, ps[i], tasks[i])
		}
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

// Heartbeat renews a run's lease.
func (d *Dispatcher) Heartbeat(ctx context.Context, runID, workerID, message string) (store.RunHeartbeatResult, error) {
	res, err := d.cfg.Store.RunHeartbeat(ctx, store.RunHeartbeatParams{RunID: runID, WorkerID: workerID, Message: message, Now: d.cfg.Clock.Now()})
	d.afterExpiry(ctx, err)
	return res, err
}

// afterExpiry wakes the workers of a run that a late heartbeat or report
// expired on the spot: its task may be claimable again, and the reaper will
// not see it.
//
// The follow-up outlives the request: it runs even when ctx (the report's)
// has ended, since the expiry is committed either way.
func (d *Dispatcher) afterExpiry(ctx context.Context, err error) {
	var ee *store.ExpiredError
	if errors.As(err, &ee) {
		ctx = context.WithoutCancel(ctx)
		d.emitTaskByID(ctx, ee.TaskID)
		d.Notify(ee.Kind, -1)
		d.due.Refresh(ctx, ee.Kind)
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
	if t.Status.Terminal() && len(t.Dependents) > 0 {
		d.afterDeps(ctx, t, now)
	}
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
		d.due.Note(t.Kind, t.RunAt)
		return
	}
	d.Notify(t.Kind, -1)
}
