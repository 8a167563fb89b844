package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// runCols are the columns of the runs view a runRow reads.
const runCols = store.RunColumns + `, kind, in_row`

// runRow is a run as stored: in its task's row (inRow: the task's latest
// run, of a single-worker task) or in run_log.
type runRow struct {
	rota.Run
	kind  string
	inRow bool
}

// scanRun reads the runCols of a row.
func scanRun(row pgx.Row) (*runRow, error) {
	var (
		sc    store.RunScan
		kind  string
		inRow bool
	)
	if err := row.Scan(sc.Dest(&kind, &inRow)...); err != nil {
		return nil, err
	}
	return &runRow{Run: sc.Run(), kind: kind, inRow: inRow}, nil
}

// lockTaskOfRun locks the task of run runID and reads the run: the lock
// order of the package doc. The task comes with its kind's MaxRunning
// (read, not locked) and the run in its row; when that is runID (a
// single-worker task's current run, the common case) the whole is one
// statement in one round trip, else the run is read from run_log in a
// second. rota.ErrNotFound when there is no such run.
func lockTaskOfRun(ctx context.Context, t *txn, runID string) (*taskRow, *runRow, error) {
	var task *taskRow
	var run *runRow
	t.queue(lockRunTaskSQL, runID).QueryRow(func(row pgx.Row) (err error) {
		task, run, err = scanLockedTask(row)
		return err
	})
	err := t.flush(ctx)
	if err == nil && (run == nil || run.ID != runID) {
		// Runs change only under their task's lock, so this read (a
		// statement that starts once the lock is held) is current.
		err = t.queryRow(ctx, func(row pgx.Row) (err error) {
			run, err = scanRun(row)
			return err
		}, runLogSQL, runID)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, notFound("run", runID)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("lock run %s: %w", runID, err)
	}
	return task, run, nil
}

// lockedTaskCols are the columns a lock of a task for a report reads
// after taskCols: its kind's MaxRunning and the run in its row.
const lockedTaskCols = `COALESCE((SELECT max_running FROM kinds WHERE name = tasks.kind), 0),
	parents > 0 OR dependents > 0, run_id, run_worker, run_status, run_start, run_end, run_lease, run_deadline, run_stop, run_message`

// scanLockedTask reads a row of taskCols and lockedTaskCols: the task and
// the run in its row (nil when none).
func scanLockedTask(row pgx.Row) (*taskRow, *runRow, error) {
	var (
		kindCap                     int
		id                          *string
		r                           runRow
		status                      string
		start, end, lease, deadline int64
	)
	var deps bool
	t, err := scanTask(row, &kindCap, &deps, &id, &r.WorkerID, &status, &start, &end, &lease, &deadline, &r.StopRequested, &r.Message)
	if err != nil {
		return nil, nil, err
	}
	t.kindCap, t.hasDeps = kindCap, deps
	if id == nil {
		return t, nil, nil
	}
	r.ID, r.TaskID, r.WorkerAddress, r.Attempt, r.Status = *id, t.ID, t.WorkerAddress, t.Attempt, rota.Status(status)
	r.StartTime, r.EndTime, r.LeaseExpiresAt, r.Deadline = tm(start), tm(end), tm(lease), tm(deadline)
	r.kind, r.inRow = t.Kind, true
	return t, &r, nil
}

// The statements of the hot paths that start from a run (named for the
// tests' EXPLAIN).
const (
	// lockRunTaskSQL locks the task of run $1 (found through the runs
	// view: run_log's primary key, tasks_run) and reads it with its
	// kind's MaxRunning and the run in its row (lockedTaskCols).
	lockRunTaskSQL = `SELECT ` + taskCols + `, ` + lockedTaskCols + `
		FROM tasks WHERE id = (SELECT task_id FROM runs WHERE id = $1) FOR NO KEY UPDATE OF tasks`
	// runLogSQL reads run $1 of run_log.
	runLogSQL = `SELECT ` + runCols + ` FROM runs WHERE id = $1 AND NOT in_row`
	// heartbeatRowSQL extends the lease of the run in task $3's row to $1
	// with message $2: a HOT update.
	heartbeatRowSQL = `UPDATE tasks SET run_lease = $1, run_message = $2 WHERE id = $3`
	// expiredTasksSQL locks (skipping locked ones) and reads the tasks of
	// up to $2 runs whose lease or deadline passed at $1, oldest expiry
	// first.
	expiredTasksSQL = `SELECT ` + taskCols + `, COALESCE((SELECT max_running FROM kinds WHERE name = tasks.kind), 0)
		FROM tasks WHERE id IN (SELECT task_id FROM runs WHERE status = 'RUNNING' AND expires_at <= $1
			ORDER BY expires_at, id LIMIT $2)
		ORDER BY id FOR NO KEY UPDATE OF tasks SKIP LOCKED`
)

// settleTaskSQL stores a task settled after the end of one of its runs
// (and that run, when kept in the row): its parameters are settle's.
var settleTaskSQL = `UPDATE tasks SET status = $1, avail = $2, failures = $3, successes = $4,
	running = $5, run_at = $6, end_time = $7, message = $8, result = $9::json, updated_at = $10,
	holders = CASE WHEN $12 THEN array_remove(holders, $13) ELSE holders END, ` + rowRunSet(14) + ` WHERE id = $11`

// ownedRun locks and loads a run for a report by workerID at now. It
// returns rota.ErrNotFound, or a lease-lost error; when the lease or
// deadline had passed it expires the run on the spot and the lease-lost
// error is a *store.ExpiredError (wrapped in keepError so the expiry
// commits).
func ownedRun(ctx context.Context, t *txn, runID, workerID string, now int64, backoff func(int) time.Duration) (*taskRow, *runRow, error) {
	task, r, err := lockTaskOfRun(ctx, t, runID)
	if err != nil {
		return nil, nil, err
	}
	if err := checkOwned(t, task, r, workerID, now, backoff); err != nil {
		return nil, nil, err
	}
	return task, r, nil
}

// checkOwned checks that the locked run r of task is RUNNING under
// workerID's lease at now. It returns a lease-lost error otherwise; when
// the lease or deadline had passed it queues the run's expiry and the
// error is a *store.ExpiredError wrapped in keepError.
func checkOwned(t *txn, task *taskRow, r *runRow, workerID string, now int64, backoff func(int) time.Duration) error {
	if r.WorkerID != workerID {
		return store.LeaseLostError(r.ID, fmt.Sprintf("it belongs to worker %s", r.WorkerID))
	}
	if r.Status != rota.StatusRunning {
		return store.LeaseLostError(r.ID, fmt.Sprintf("it already ended %s", r.Status))
	}
	if exp := store.RunExpiresAt(ms(r.LeaseExpiresAt), ms(r.Deadline)); exp <= now {
		why := "its lease expired"
		expireRun(t, task, r, now, backoff)
		if !r.Deadline.IsZero() && ms(r.Deadline) <= now {
			why = "its timeout passed"
		}
		return keepError{&store.ExpiredError{Kind: r.kind, TaskID: r.TaskID, Err: store.LeaseLostError(r.ID, why)}}
	}
	return nil
}

// RunHeartbeat implements store.Store.
func (s *Store) RunHeartbeat(ctx context.Context, p store.RunHeartbeatParams) (store.RunHeartbeatResult, error) {
	var res store.RunHeartbeatResult
	err := s.tx(ctx, "heartbeat", func(t *txn) error {
		now := ms(p.Now)
		task, r, err := ownedRun(ctx, t, p.RunID, p.WorkerID, now, nil)
		if err != nil {
			return err
		}
		lease := now + int64(task.HeartbeatTimeoutSeconds)*1000
		res = store.RunHeartbeatResult{Stop: r.StopRequested, LeaseExpiresAt: tm(lease),
			HeartbeatTimeoutSeconds: task.HeartbeatTimeoutSeconds}
		msg := r.Message
		if p.Message != "" {
			msg = p.Message
		}
		if r.inRow {
			// A HOT update: no index covers the run's lease or message.
			t.queue(heartbeatRowSQL, lease, msg, task.ID)
		} else {
			t.queue(`UPDATE run_log SET lease_expires_at = $1, expires_at = $2, message = $3 WHERE id = $4`,
				lease, store.RunExpiresAt(lease, ms(r.Deadline)), msg, r.ID)
		}
		// The sighting is written only past seenGrain (see queueSeeWorker).
		t.queue(`WITH up AS (
				UPDATE workers SET last_seen = $1::bigint WHERE id = $2 AND (last_seen <= $1::bigint - `+strconv.Itoa(seenGrain)+` OR stop_requested)
				RETURNING stop_requested
			)
			SELECT COALESCE((SELECT stop_requested FROM up), (SELECT stop_requested FROM workers WHERE id = $2), false)`,
			now, p.WorkerID).QueryRow(func(row pgx.Row) error { return row.Scan(&res.Drain) })
		return nil
	})
	return res, err
}

// completeOne ends one run in a transaction of its own (see RunComplete).
func (s *Store) completeOne(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	var out *rota.Task
	err := s.tx(ctx, "complete run", func(t *txn) error {
		task, r, err := ownedRun(ctx, t, p.RunID, p.WorkerID, ms(p.Now), p.Backoff)
		if err != nil {
			return err
		}
		applyReport(t, task, r, p)
		if out = settledTask(task, r); out == nil {
			queueTaskWithRuns(t, task.ID, &out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// settledTask is the answer to a report of run r that settled task, as
// both are in memory once settled, when that is the whole task: a
// single-worker task at its first attempt, with the run in its row (so no
// run in run_log) and no dependencies. Otherwise nil: the answer is read
// back (queueTaskWithRuns). The fields are as a read would give them:
// instants in milliseconds, UTC.
func settledTask(task *taskRow, r *runRow) *rota.Task {
	if task.Workers != 1 || task.Attempt != 1 || task.hasDeps || !r.inRow || r.TaskID != task.ID {
		return nil
	}
	out := task.Task
	out.RunAt, out.EndTime = tm(ms(out.RunAt)), tm(ms(out.EndTime))
	if len(out.Result) == 0 {
		out.Result = nil
	}
	run := r.Run
	run.StartTime, run.EndTime, run.Deadline = tm(ms(run.StartTime)), tm(ms(run.EndTime)), tm(ms(run.Deadline))
	run.LeaseExpiresAt = tm(ms(run.LeaseExpiresAt))
	if run.Status != rota.StatusRunning {
		run.LeaseExpiresAt = time.Time{} // the row's run_lease is 0 once it ended
	}
	out.Runs = []rota.Run{run}
	return &out
}

// applyReport queues the end of the owned, locked run r of task with the
// worker's report p, and the task's move.
func applyReport(t *txn, task *taskRow, r *runRow, p store.RunCompleteParams) {
	status, run := store.ReportSettle(p, r.StopRequested)
	endRun(t, r, status, p.Message, ms(p.Now))
	settle(t, task, r, run)
}

// endRun queues the end of a RUNNING run. Its task must be locked; settle
// takes the run's worker off the task's holders unless it succeeded.
func endRun(t *txn, r *runRow, status rota.Status, msg string, now int64) {
	r.Status, r.EndTime, r.Message = status, tm(now), msg
	if r.inRow {
		// Written with its task by settle, in the same update.
		return
	}
	if t.group != nil {
		t.group.endRun(r)
		return
	}
	t.queue(`UPDATE run_log SET status = $1, end_time = $2, expires_at = 0, lease_expires_at = 0, message = $3
		WHERE id = $4`, string(status), now, msg, r.ID)
}

// settle queues the move of a locked task after one of its runs (r,
// already ended) ended with the given outcome, and updates t to what it
// stores, so that several runs of one task can be settled in a row. It
// records a notification when the task is claimable again, or when the run
// freed a place under its kind's MaxRunning cap.
func settle(tx *txn, t *taskRow, r *runRow, run store.SettleRun) {
	t.Running = max(t.Running-1, 0)
	now := ms(run.Now)
	if t.kindCap > 0 {
		tx.notifySelf(t.Kind, now, now)
	}
	// The run's worker no longer holds the task, unless it succeeded.
	dropHolder := r.Status != rota.StatusSuccess
	if tx.group != nil {
		defer tx.group.settled(t, r.WorkerID, dropHolder, now)
	}
	if t.Done {
		// A straggler of a task that already ended: only the counter moves.
		if tx.group != nil {
			return
		}
		tx.queue(`UPDATE tasks SET running = $1, updated_at = $2,
			holders = CASE WHEN $3 THEN array_remove(holders, $4) ELSE holders END, `+rowRunSet(6)+` WHERE id = $5`,
			append([]any{t.Running, now, dropHolder, r.WorkerID, t.ID}, rowRunArgs(r)...)...)
		return
	}
	st := t.Settle(run)
	if t.Avail {
		tx.notifySelf(t.Kind, ms(st.RunAt), now)
	}
	if tx.group != nil {
		if st.StopOthers {
			tx.group.stopOthers(t.ID)
		}
		return
	}
	tx.queue(settleTaskSQL,
		append([]any{string(st.Status), t.Avail, t.Failures, t.Successes, t.Running, ms(st.RunAt), ms(st.EndTime), st.Message,
			nullJSON(st.Result), now, t.ID, dropHolder, r.WorkerID}, rowRunArgs(r)...)...)
	if st.StopOthers {
		tx.queue(`UPDATE run_log SET stop_requested = true WHERE task_id = $1 AND status = 'RUNNING'`, t.ID)
	}
}

// rowRunSet is the SET list that stores the state of a run kept in its
// task's row, from the parameters rowRunArgs gives from $n on (a run of
// run_log leaves the row's run as it is).
func rowRunSet(n int) string {
	p := func(i int) string { return "$" + strconv.Itoa(n+i) }
	return `run_status = CASE WHEN ` + p(0) + ` THEN ` + p(1) + ` ELSE run_status END,
		run_end = CASE WHEN ` + p(0) + ` THEN ` + p(2) + ` ELSE run_end END,
		run_lease = CASE WHEN ` + p(0) + ` AND ` + p(1) + ` <> 'RUNNING' THEN 0 ELSE run_lease END,
		run_message = CASE WHEN ` + p(0) + ` THEN ` + p(3) + ` ELSE run_message END`
}

// rowRunArgs are the parameters of rowRunSet for run r.
func rowRunArgs(r *runRow) []any {
	return []any{r.inRow, string(r.Status), ms(r.EndTime), r.Message}
}

// expireRun queues the end of a run whose lease or deadline passed at now,
// as TIMEOUT. Its task (t) must be locked.
func expireRun(tx *txn, t *taskRow, r *runRow, now int64, backoff func(int) time.Duration) {
	msg, run := store.ExpirySettle(r.Deadline, tm(now), r.StopRequested, backoff)
	endRun(tx, r, rota.StatusTimeout, msg, now)
	settle(tx, t, r, run)
}

// RunExpire implements store.Store. It locks the tasks of the expired runs
// it found with SKIP LOCKED: a task that a report is changing right now is
// left for that report (which expires the run itself if it is late) or for
// the next pass.
func (s *Store) RunExpire(ctx context.Context, p store.RunExpireParams) (store.RunExpireResult, error) {
	var res store.RunExpireResult
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	err := s.tx(ctx, "expire runs", func(t *txn) error {
		res = store.RunExpireResult{}
		if err := t.fence(ctx, p.Term, p.Now); err != nil {
			return err
		}
		now := ms(p.Now)
		var tasks []*taskRow
		err := t.query(ctx, func(rows pgx.Rows) (err error) {
			tasks, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*taskRow, error) {
				var kindCap int
				r, err := scanTask(row, &kindCap)
				if err == nil {
					r.kindCap = kindCap
				}
				return r, err
			})
			return err
		}, expiredTasksSQL, now, limit)
		if err != nil {
			return fmt.Errorf("find expired runs: %w", err)
		}
		if len(tasks) == 0 {
			return nil
		}
		byID := make(map[string]*taskRow, len(tasks))
		ids := make([]string, len(tasks))
		for i, task := range tasks {
			byID[task.ID], ids[i] = task, task.ID
		}
		// The tasks are locked: their runs are current.
		var runs []*runRow
		err = t.query(ctx, func(rows pgx.Rows) (err error) {
			runs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*runRow, error) { return scanRun(row) })
			return err
		}, `SELECT `+runCols+` FROM runs WHERE task_id = ANY ($1) AND status = 'RUNNING'
			AND expires_at <= $2 ORDER BY expires_at, id LIMIT $3`, ids, now, limit)
		if err != nil {
			return fmt.Errorf("load expired runs: %w", err)
		}
		for _, r := range runs {
			expireRun(t, byID[r.TaskID], r, now, p.Backoff)
			res.Add(r.TaskID, r.kind)
		}
		return nil
	})
	return res, err
}

// RunNextExpiry implements store.Store.
func (s *Store) RunNextExpiry(ctx context.Context) (time.Time, bool, error) {
	var v *int64
	if err := s.pool.QueryRow(ctx, `SELECT min(expires_at) FROM runs WHERE status = 'RUNNING'`).Scan(&v); err != nil {
		return time.Time{}, false, s.translate("next expiry", err)
	}
	if v == nil {
		return time.Time{}, false, nil
	}
	return tm(*v), true, nil
}
