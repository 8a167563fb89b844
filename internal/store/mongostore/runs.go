package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// errExpired carries, out of a compare-and-set, that the run was found
// expired and expired on the spot (the write applied).
type errExpired struct{ err error }

func (e errExpired) Error() string { return e.err.Error() }

// ownRun checks, inside a compare-and-set of t, that run runID of t is
// held by worker at now. A run past its lease or deadline is expired in
// t (the caller writes t) and reported as an errExpired.
func ownRun(t *taskDoc, runID, worker string, now int64, backoff func(int) time.Duration) (int, error) {
	i := t.run(runID)
	if i < 0 {
		return -1, store.NotFoundError("run", runID)
	}
	r := &t.Runs[i]
	if r.Worker != worker {
		return -1, store.LeaseLostError(runID, fmt.Sprintf("it belongs to worker %s", r.Worker))
	}
	if r.Status != string(rota.StatusRunning) {
		return -1, store.LeaseLostError(runID, fmt.Sprintf("it already ended %s", r.Status))
	}
	if store.RunExpiresAt(r.Lease, r.Deadline) <= now {
		why := "its lease expired"
		if r.Deadline != 0 && r.Deadline <= now {
			why = "its timeout passed"
		}
		expireRun(t, i, now, backoff)
		return -1, errExpired{&store.ExpiredError{Kind: t.Kind, TaskID: t.ID, Err: store.LeaseLostError(runID, why)}}
	}
	return i, nil
}

// Run ids are the caller's (TaskClaimParams.NewRunID), so the task of a
// run is found through the indexed rids array; a node also remembers the
// tasks of the runs it handed out (up to maxRunCache), which reads the
// task by _id instead (FerretDB reads only an {_id} filter by key).
const maxRunCache = 100_000

func (s *Store) rememberRun(runID, taskID string) {
	s.mu.Lock()
	if len(s.runTask) < maxRunCache {
		s.runTask[runID] = taskID
	}
	s.mu.Unlock()
}

func (s *Store) forgetRun(runID string) {
	s.mu.Lock()
	delete(s.runTask, runID)
	s.mu.Unlock()
}

// runFilter finds the task of a run.
func runFilter(runID string) bson.D { return bson.D{{Key: "rids", Value: runID}} }

// mutateRun is mutateTask on the task of run runID, for a worker's call:
// an errExpired of fn is written (the expiry) and returned as its
// ExpiredError.
func (s *Store) mutateRun(ctx context.Context, runID string, fn func(t *taskDoc) error) (*taskDoc, error) {
	var expired error
	filter := runFilter(runID)
	s.mu.Lock()
	if tid, ok := s.runTask[runID]; ok {
		filter = id(tid)
	}
	s.mu.Unlock()
	t, found, err := s.mutateTask(ctx, filter, func(t *taskDoc) error {
		expired = nil
		err := fn(t)
		var ee errExpired
		if errors.As(err, &ee) {
			expired = ee.err
			return nil
		}
		return err
	})
	if t != nil && t.run(runID) >= 0 && t.Runs[t.run(runID)].Status != string(rota.StatusRunning) {
		s.forgetRun(runID)
	}
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, store.NotFoundError("run", runID)
	case expired != nil:
		s.afterEnd(ctx, t, store.FromMillis(t.End))
		return nil, expired
	}
	return t, nil
}

// RunHeartbeat implements store.Store: one compare-and-set of the task
// document, and the worker's sighting (one update that returns its stop
// flag).
func (s *Store) RunHeartbeat(ctx context.Context, p store.RunHeartbeatParams) (store.RunHeartbeatResult, error) {
	now := store.Millis(p.Now)
	var res store.RunHeartbeatResult
	_, err := s.mutateRun(ctx, p.RunID, func(t *taskDoc) error {
		i, err := ownRun(t, p.RunID, p.WorkerID, now, nil)
		if err != nil {
			return err
		}
		r := &t.Runs[i]
		r.Lease = now + int64(t.HBTimeoutS)*1000
		if p.Message != "" {
			r.Message = p.Message
		}
		res = store.RunHeartbeatResult{Stop: r.Stop, LeaseExpiresAt: store.FromMillis(r.Lease), HeartbeatTimeoutSeconds: t.HBTimeoutS}
		return nil
	})
	if err != nil {
		return store.RunHeartbeatResult{}, err
	}
	var w struct {
		Stop bool `bson:"stop"`
	}
	err = s.workers.FindOneAndUpdate(ctx, id(p.WorkerID), bson.D{{Key: "$set", Value: bson.D{{Key: "last", Value: now}}}}).Decode(&w)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return res, wrap("worker seen", err)
	}
	res.Drain = w.Stop
	return res, nil
}

// RunComplete implements store.Store: one compare-and-set of the task
// document (the run ends, the task settles), then, when the task ended,
// its dependents.
func (s *Store) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	now := store.Millis(p.Now)
	t, err := s.mutateRun(ctx, p.RunID, func(t *taskDoc) error {
		i, err := ownRun(t, p.RunID, p.WorkerID, now, p.Backoff)
		if err != nil {
			return err
		}
		status, run := store.ReportSettle(p, t.Runs[i].Stop)
		endRun(t, i, status, p.Message, run)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.afterEnd(ctx, t, p.Now)
	out := t.task(true)
	if t.Done && t.HasDeps {
		if out.Dependents, err = s.dependents(ctx, t.ID); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// afterEnd is what follows a write that ended a run of t: the
// dependents of an ended task, a wake-up for a claimable one.
func (s *Store) afterEnd(ctx context.Context, t *taskDoc, now time.Time) {
	if t.Done {
		if err := s.settleDependents(ctx, t, now); err != nil {
			s.log.Warn("mongostore: settle dependents (the reaper finishes it)", "task", t.ID, "err", err)
		}
		return
	}
	if t.Avail {
		s.bump(ctx, t.Kind)
	}
}

// endRun ends run i of t with status and message msg, and settles t by the
// shared rules.
func endRun(t *taskDoc, i int, status rota.Status, msg string, run store.SettleRun) {
	now := store.Millis(run.Now)
	r := &t.Runs[i]
	r.Status, r.End, r.Lease, r.Message = string(status), now, 0, msg
	t.Running = max(t.Running-1, 0)
	if t.Done {
		return
	}
	row := t.row()
	st := row.Settle(run)
	t.setRow(&row)
	if st.StopOthers {
		for j := range t.Runs {
			if t.Runs[j].Status == string(rota.StatusRunning) {
				t.Runs[j].Stop = true
			}
		}
	}
}

// expireRun ends run i of t as TIMEOUT at now.
func expireRun(t *taskDoc, i int, now int64, backoff func(int) time.Duration) {
	r := t.Runs[i]
	msg, run := store.ExpirySettle(store.FromMillis(r.Deadline), store.FromMillis(now), r.Stop, backoff)
	endRun(t, i, rota.StatusTimeout, msg, run)
}

// RunExpire implements store.Store. The fence is checked first (the
// leader document), then each expired run ends by a compare-and-set of
// its task, so that a run a worker reports meanwhile is never ended
// twice. It also finishes the dependents an interrupted end left.
func (s *Store) RunExpire(ctx context.Context, p store.RunExpireParams) (store.RunExpireResult, error) {
	var res store.RunExpireResult
	if err := s.fence(ctx, p.Term, p.Now); err != nil {
		return res, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	now := store.Millis(p.Now)
	docs, err := findAll[taskDoc](ctx, s.tasks, bson.D{{Key: "exp", Value: bson.D{{Key: "$gt", Value: 0}, {Key: "$lte", Value: now}}}},
		"expired runs", options.Find().SetSort(bson.D{{Key: "exp", Value: 1}, {Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return res, err
	}
	for _, d := range docs {
		if res.Expired >= limit {
			break
		}
		n := 0
		t, _, err := s.mutateTask(ctx, id(d.ID), func(t *taskDoc) error {
			n = 0
			for i := range t.Runs {
				r := t.Runs[i]
				if r.Status == string(rota.StatusRunning) && store.RunExpiresAt(r.Lease, r.Deadline) <= now && res.Expired+n < limit {
					expireRun(t, i, now, p.Backoff)
					n++
				}
			}
			if n == 0 {
				return errNoWrite
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		for range n {
			res.Add(t.ID, t.Kind)
		}
		if n > 0 {
			s.afterEnd(ctx, t, p.Now)
		}
	}
	return res, s.finishDependents(ctx, p.Now, limit)
}

// RunNextExpiry implements store.Store.
func (s *Store) RunNextExpiry(ctx context.Context) (time.Time, bool, error) {
	docs, err := findAll[struct {
		Exp int64 `bson:"exp"`
	}](ctx, s.tasks, bson.D{{Key: "exp", Value: bson.D{{Key: "$gt", Value: 0}}}}, "next expiry",
		options.Find().SetSort(bson.D{{Key: "exp", Value: 1}}).SetLimit(1).SetProjection(bson.D{{Key: "exp", Value: 1}}))
	if err != nil || len(docs) == 0 {
		return time.Time{}, false, err
	}
	return store.FromMillis(docs[0].Exp), true, nil
}
