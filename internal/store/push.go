package store

import (
	"context"
	"time"
)

// PushStore keeps the push workers: workers that registered an HTTP
// address to which Rota posts the tasks of their kinds in push mode
// (rota.Kind.Dispatch). It is part of Store; the push dispatcher
// (dispatch.Push) asks only for it and the claim and report methods.
//
// A push worker is an ordinary worker (its row lists in WorkerList,
// WorkerListPage; it is stopped, deregistered and pruned as any) plus its
// registration: address and capacity. A registration outlives restarts of
// the server and of the worker's process; a new one of the same id
// replaces it.
type PushStore interface {
	// WorkerRegister records a push worker: its worker row is created or
	// updated as a claim would (kinds = params.Kinds, seen at Now, no
	// longer deregistered; a stop request stays), with Address as its
	// address, and its registration (Address, Capacity) is stored or
	// replaced. It returns the worker as WorkerList shows it, Capacity set.
	WorkerRegister(ctx context.Context, p WorkerRegisterParams) (*PushWorker, error)

	// PushWorkerList returns every registered push worker whose worker row
	// still exists (a pruned worker's registration is ignored), by id,
	// each with its running runs counted at the time of the read.
	PushWorkerList(ctx context.Context) ([]PushWorker, error)

	// PushWorkersSeen records that the workers named answered a health
	// check at now (their LastSeen moves to now if later; the long-poll
	// wait of their last claim is cleared), so that a healthy push worker,
	// which never claims, lists as active. Unknown ids are ignored.
	PushWorkersSeen(ctx context.Context, ids []string, now time.Time) error
}

// WorkerRegisterParams registers a push worker. Validation is the
// caller's job.
type WorkerRegisterParams struct {
	WorkerID string
	Kinds    []string // 1 to MaxWorkerKinds kinds, no duplicates
	Address  string   // the URL tasks are posted to
	Capacity int      // ≥ 1: runs at once
	Now      time.Time
}

// PushWorker is a registered push worker.
type PushWorker struct {
	WorkerID     string
	Address      string
	Kinds        []string
	Capacity     int
	Running      int  // its RUNNING runs, of any kind
	Stopped      bool // asked to stop (drain) or deregistered: no new work
	RegisteredAt time.Time
}

// Free is how many more runs the worker takes now: Capacity − Running,
// 0 for a stopped worker.
func (w PushWorker) Free() int {
	if w.Stopped {
		return 0
	}
	return max(w.Capacity-w.Running, 0)
}

// PushWorkerSelect is the statement the SQL backends read push workers
// with, up to its WHERE or ORDER BY: the registration joined with its
// worker row (a pruned worker's registration is left out), its columns
// in the order of PushWorker's WorkerID, Address, Kinds, Capacity,
// RegisteredAt (unix ms), Stopped and Running. truth is the backend's
// literal of true ("1", "true"); running its SQL count of the running runs
// of the worker aliased w (RunningOf where runs is a table or view).
func PushWorkerSelect(truth, running string) string {
	return `SELECT p.worker_id, p.address, w.kinds, p.capacity, p.registered_at,
		(w.stop_requested = ` + truth + ` OR w.deregistered = ` + truth + `), ` + running + `
		FROM push_workers p JOIN workers w ON w.id = p.worker_id`
}

// RunningOf is the SQL count of the running runs of the worker aliased w,
// for a backend with a runs table or view.
const RunningOf = `(SELECT count(*) FROM runs r WHERE r.worker_id = w.id AND r.status = 'RUNNING')`
