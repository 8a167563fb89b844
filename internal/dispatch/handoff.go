package dispatch

import (
	"context"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// starter is a store that inserts a task with its first run already
// started for a waiting claim, when nothing stands in the way of that
// claim (pgstore: one statement, where a submit and a claim are three
// round trips and two commits).
type starter interface {
	TaskInsertStarted(ctx context.Context, p store.TaskInsertParams, s store.StartFor) (store.TaskInsertResult, *rota.ClaimedRun, error)
}

// submitStarted is Submit for one task (store.Startable) with a claim of
// its kind asleep on this node: it takes that claim (waiters.take) and
// asks the store to start the task's run for it with the insert. The
// claim gets the run, or nothing (the store inserted the task waiting:
// the claim then looks at the store as usual, and finds it). It reports
// false, doing nothing, when the store cannot start runs or no claim
// sleeps.
func (d *Dispatcher) submitStarted(ctx context.Context, p store.TaskInsertParams) ([]store.TaskInsertResult, bool, error) {
	st, ok := d.cfg.Store.(starter)
	if !ok || d.waiters.waiting(p.Kind) {
		// (Waiting tasks of the kind: the store would refuse, see
		// between.go.)
		return nil, false, nil
	}
	w := d.waiters.take(p.Kind)
	if w == nil {
		// None asleep: a worker's claim may be on its way (between.go).
		return d.submitNext(ctx, st, p)
	}
	var runs []rota.ClaimedRun
	// The claim waits for exactly one value (see waiters.take), sent once
	// the task's event is out (so that its events come in order: the
	// task's, then its run's).
	defer func() { w.handed <- runs }()
	now := d.cfg.Clock.Now()
	res, run, err := st.TaskInsertStarted(ctx, p, store.StartFor{WorkerID: w.worker, WorkerAddress: w.address,
		RunID: d.newRunID(), Now: now})
	if err != nil {
		return nil, true, err
	}
	t := res.Task
	d.emitSubmitted(t, now)
	if run != nil {
		runs = []rota.ClaimedRun{*run}
	} else {
		// Waiting: the taken claim looks at the store again at once; other
		// claims of the kind hear of it as of any submit (the taken one is
		// not woken, see waiters.notify).
		d.waiters.markWaiting(t.Kind)
		d.Notify(t.Kind, 1)
	}
	return []store.TaskInsertResult{res}, true, nil
}
