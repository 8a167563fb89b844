package mysqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// heldRun is a run a report or the reaper works on, with its task locked:
// the task row's own run (hist nil) or one of run_history.
type heldRun struct {
	task       *taskRow
	hist       *rota.Run
	workerStop bool  // the run's worker was asked to drain
	workerSeen int64 // the worker's recorded last sighting (unix ms)
	kindCap    int   // the kind's MaxRunning
}

// run returns the run as a rota.Run.
func (h *heldRun) run() rota.Run {
	if h.hist != nil {
		return *h.hist
	}
	return h.task.rotaRun()
}

// lockedCols are what lockRun reads beside the task: the stop flag and
// the last sighting of a worker (the first two parameters) and the kind's
// cap, none locked.
const lockedCols = `, COALESCE((SELECT w.stop_requested FROM workers w WHERE w.id = ?), 0),
	COALESCE((SELECT w.last_seen FROM workers w WHERE w.id = ?), 0),
	COALESCE((SELECT k.max_running FROM kinds k WHERE k.name = tasks.kind), 0)`

// lockRun finds run runID and locks its task (FOR UPDATE; with skip, a
// task locked by another transaction is passed over: nil, nil). workerID
// is the worker whose drain flag is read.
func lockRun(t *txn, runID, workerID string, skip bool) (*heldRun, error) {
	lock := ` FOR UPDATE`
	if skip {
		lock += ` SKIP LOCKED`
	}
	var h heldRun
	var stop int
	scan := func(row *sql.Row) error {
		var err error
		h.task, err = scanTask(scanFunc(func(dest ...any) error { return row.Scan(append(dest, &stop, &h.workerSeen, &h.kindCap)...) }))
		return err
	}
	err := scan(t.QueryRowContext(t.ctx, `SELECT `+taskCols+lockedCols+` FROM tasks WHERE run_id = ?`+lock, workerID, workerID, runID))
	if err == nil {
		h.workerStop = stop == 1
		return &h, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, wrap("find run "+runID, err)
	}
	var taskID string
	switch err := t.QueryRowContext(t.ctx, `SELECT task_id FROM run_history WHERE id = ?`, runID).Scan(&taskID); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, notFound("run", runID)
	case err != nil:
		return nil, wrap("find run "+runID, err)
	}
	if err := scan(t.QueryRowContext(t.ctx, `SELECT `+taskCols+lockedCols+` FROM tasks WHERE id = ?`+lock, workerID, workerID, taskID)); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, wrap("lock task "+taskID, err)
	}
	h.workerStop = stop == 1
	var rs store.RunScan
	if err := t.QueryRowContext(t.ctx, `SELECT `+store.RunColumns+` FROM run_history WHERE id = ?`, runID).Scan(rs.Dest()...); err != nil {
		return nil, wrap("read run "+runID, err)
	}
	r := rs.Run()
	h.hist = &r
	return &h, nil
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// ownedRun locks run runID for a report by workerID at now. It returns
// rota.ErrNotFound, or a lease-lost error, possibly after expiring the run
// on the spot (then wrapped in keepError so that the expiry commits).
func ownedRun(t *txn, runID, workerID string, now int64, backoff func(int) time.Duration) (*heldRun, error) {
	h, err := lockRun(t, runID, workerID, false)
	if err != nil {
		return nil, err
	}
	r := h.run()
	if r.WorkerID != workerID {
		return nil, store.LeaseLostError(runID, fmt.Sprintf("it belongs to worker %s", r.WorkerID))
	}
	if r.Status != rota.StatusRunning {
		return nil, store.LeaseLostError(runID, fmt.Sprintf("it already ended %s", r.Status))
	}
	if exp := store.RunExpiresAt(ms(r.LeaseExpiresAt), ms(r.Deadline)); exp <= now {
		why := "its lease expired"
		if !r.Deadline.IsZero() && ms(r.Deadline) <= now {
			why = "its timeout passed"
		}
		if err := expireRun(t, h, now, backoff); err != nil {
			return nil, err
		}
		return nil, keepError{&store.ExpiredError{Kind: h.task.Kind, TaskID: h.task.ID, Err: store.LeaseLostError(runID, why)}}
	}
	return h, nil
}

// RunHeartbeat implements store.Store.
func (s *Store) RunHeartbeat(ctx context.Context, p store.RunHeartbeatParams) (store.RunHeartbeatResult, error) {
	var res store.RunHeartbeatResult
	err := s.tx(ctx, "heartbeat", func(t *txn) error {
		now := ms(p.Now)
		h, err := ownedRun(t, p.RunID, p.WorkerID, now, nil)
		if err != nil {
			return err
		}
		r := h.run()
		hb := h.task.HeartbeatTimeoutSeconds
		lease := now + int64(hb)*1000
		msg := r.Message
		if p.Message != "" {
			msg = p.Message
		}
		if h.hist != nil {
			_, err = t.exec(`UPDATE run_history SET lease_expires_at = ?, message = ? WHERE id = ?`, lease, msg, r.ID)
		} else {
			_, err = t.exec(`UPDATE tasks SET run_lease = ?, run_message = ? WHERE id = ?`, lease, msg, h.task.ID)
		}
		if err != nil {
			return wrap("renew lease of "+r.ID, err)
		}
		// The sighting is written only past seenGrain (see workerSeen).
		if h.workerSeen <= now-seenGrain {
			if _, err := t.exec(`UPDATE workers SET last_seen = ? WHERE id = ? AND last_seen <= ?`,
				now, p.WorkerID, now-seenGrain); err != nil {
				return wrap("worker seen", err)
			}
		}
		res = store.RunHeartbeatResult{Stop: r.StopRequested, Drain: h.workerStop, LeaseExpiresAt: tm(lease), HeartbeatTimeoutSeconds: hb}
		return nil
	})
	return res, err
}

// complete applies report p in transaction t and returns the task it
// settled, with its runs (and, once it ended, its dependents).
func complete(t *txn, p store.RunCompleteParams) (*rota.Task, error) {
	h, err := ownedRun(t, p.RunID, p.WorkerID, ms(p.Now), p.Backoff)
	if err != nil {
		return nil, err
	}
	status, run := store.ReportSettle(p, h.run().StopRequested)
	if err := finishRun(t, h, status, p.Message, run); err != nil {
		return nil, err
	}
	if err := withRuns(t.ctx, t, h.task); err != nil {
		return nil, err
	}
	if h.task.Done && h.task.dependents > 0 {
		if _, h.task.Dependents, err = taskLinks(t.ctx, t, h.task.ID, false); err != nil {
			return nil, err
		}
	}
	return &h.task.Task, nil
}

// finishRun ends the held run with status and message msg and settles its
// task (store.Settle) in the same write of the task row; a run of the
// history is ended in its own row.
func finishRun(t *txn, h *heldRun, status rota.Status, msg string, run store.SettleRun) error {
	wasDone, st, err := endRun(t, h, status, msg, run)
	if err != nil {
		return err
	}
	if err := writeSettled(t, []*taskRow{h.task}, []int64{ms(run.Now)}); err != nil {
		return err
	}
	return afterSettle(t, h.task, wasDone, st, ms(run.Now))
}

// endRun ends the held run with status and message msg (a run of the
// history in its own row, the task row's run in memory) and settles its
// task in memory (store.Settle, unless it was done before).
func endRun(t *txn, h *heldRun, status rota.Status, msg string, run store.SettleRun) (wasDone bool, st store.Settled, err error) {
	row := h.task
	now := ms(run.Now)
	row.Running = max(row.Running-1, 0)
	if h.kindCap > 0 {
		t.notifySelf(row.Kind, now, now) // a place under the cap is free
	}
	if h.hist != nil {
		if _, err := t.exec(`UPDATE run_history SET status = ?, end_time = ?, lease_expires_at = 0, message = ?, run_live = NULL
			WHERE id = ?`, string(status), now, msg, h.hist.ID); err != nil {
			return false, st, wrap("end run "+h.hist.ID, err)
		}
		h.hist.Status = status
	} else {
		row.run.status, row.run.end, row.run.lease, row.run.message = string(status), now, 0, msg
	}
	wasDone = row.Done
	if !wasDone {
		st = row.Settle(run)
	}
	return wasDone, st, nil
}

// afterSettle does what a settled task needs beside its row: the wake-up
// of its kind when it is claimable again, the stop of its other runs, its
// dependents.
func afterSettle(t *txn, row *taskRow, wasDone bool, st store.Settled, now int64) error {
	if wasDone {
		return nil
	}
	if row.Avail {
		t.notifySelf(row.Kind, ms(row.RunAt), now)
	}
	if st.StopOthers && row.Workers > 1 {
		if _, err := t.exec(`UPDATE run_history SET stop_requested = 1 WHERE task_id = ? AND status = 'RUNNING'`, row.ID); err != nil {
			return wrap("stop other runs of "+row.ID, err)
		}
	}
	if row.Done && row.dependents > 0 {
		return depsEnded(t, row.ID, row.Status, now)
	}
	return nil
}

// expireRun ends the held run, whose lease or deadline passed at now, as
// TIMEOUT.
func expireRun(t *txn, h *heldRun, now int64, backoff func(int) time.Duration) error {
	r := h.run()
	msg, run := store.ExpirySettle(r.Deadline, tm(now), r.StopRequested, backoff)
	return finishRun(t, h, rota.StatusTimeout, msg, run)
}

// expiresAt is the SQL of store.RunExpiresAt over a lease and a deadline
// column.
func expiresAt(lease, deadline string) string {
	return `CASE WHEN ` + deadline + ` <> 0 AND ` + deadline + ` < ` + lease + ` THEN ` + deadline + ` ELSE ` + lease + ` END`
}

// expiredQuery lists the running runs whose lease or deadline passed at a
// given instant, oldest expiry first: the reaper's index holds running
// tasks only.
var expiredQuery = `SELECT id, e FROM (
	(SELECT run_id AS id, ` + expiresAt("run_lease", "run_deadline") + ` AS e FROM tasks WHERE run_live = 1)
	UNION ALL
	(SELECT id, ` + expiresAt("lease_expires_at", "deadline") + ` FROM run_history WHERE run_live = 1)) x
	WHERE e <= ? ORDER BY e, id LIMIT ?`

// RunExpire implements store.Store.
func (s *Store) RunExpire(ctx context.Context, p store.RunExpireParams) (store.RunExpireResult, error) {
	var res store.RunExpireResult
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	err := s.tx(ctx, "expire runs", func(t *txn) error {
		res = store.RunExpireResult{}
		if err := fence(t, p.Term, p.Now); err != nil {
			return err
		}
		now := ms(p.Now)
		rows, err := t.QueryContext(t.ctx, expiredQuery, now, limit)
		ids, err := collect(rows, err, "expired runs", func(sc scanner) (string, error) {
			var id string
			var e int64
			err := sc.Scan(&id, &e)
			return id, err
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			h, err := lockRun(t, id, "", true)
			if err != nil || h == nil {
				if errors.Is(err, rota.ErrNotFound) {
					continue
				}
				return err
			}
			r := h.run()
			if r.Status != rota.StatusRunning || store.RunExpiresAt(ms(r.LeaseExpiresAt), ms(r.Deadline)) > now {
				continue // reported meanwhile
			}
			if err := expireRun(t, h, now, p.Backoff); err != nil {
				return err
			}
			res.Add(h.task.ID, h.task.Kind)
		}
		return nil
	})
	return res, err
}

// RunNextExpiry implements store.Store.
func (s *Store) RunNextExpiry(ctx context.Context) (time.Time, bool, error) {
	var v sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT MIN(e) FROM (
		(SELECT `+expiresAt("run_lease", "run_deadline")+` AS e FROM tasks WHERE run_live = 1)
		UNION ALL
		(SELECT `+expiresAt("lease_expires_at", "deadline")+` FROM run_history WHERE run_live = 1)) x`).Scan(&v); err != nil {
		return time.Time{}, false, unavailable(wrap("next expiry", err))
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return tm(v.Int64), true, nil
}
