package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// runRow is a run as stored.
type runRow struct {
	rota.Run
	kind string
}

func getRun(ctx context.Context, q queryer, id string) (*runRow, error) {
	var kind string
	var r *rota.Run
	row := q.QueryRowContext(ctx, `SELECT `+runCols+`, kind FROM runs WHERE id = ?`, id)
	r, err := scanRun(row, &kind)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("run", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get run %s: %w", id, err)
	}
	return &runRow{Run: *r, kind: kind}, nil
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// ownedRun loads a run for a report by workerID at now. It returns
// rota.ErrNotFound, or a lease-lost error, possibly after expiring the run
// on the spot (then wrapped in keepError so the expiry commits).
func ownedRun(ctx context.Context, tx *wtx, runID, workerID string, now int64, backoff func(int) time.Duration) (*runRow, error) {
	r, err := getRun(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	if r.WorkerID != workerID {
		return nil, store.LeaseLostError(runID, fmt.Sprintf("it belongs to worker %s", r.WorkerID))
	}
	if r.Status != rota.StatusRunning {
		return nil, store.LeaseLostError(runID, fmt.Sprintf("it already ended %s", r.Status))
	}
	if exp := store.RunExpiresAt(ms(r.LeaseExpiresAt), ms(r.Deadline)); exp <= now {
		why := "its lease expired"
		if err := expireRun(ctx, tx, r, now, backoff); err != nil {
			return nil, err
		}
		if r.Deadline.UnixMilli() <= now && !r.Deadline.IsZero() {
			why = "its timeout passed"
		}
		return nil, keepError{&store.ExpiredError{Kind: r.kind, TaskID: r.TaskID, Err: store.LeaseLostError(runID, why)}}
	}
	return r, nil
}

// RunHeartbeat implements store.Store.
func (s *Store) RunHeartbeat(ctx context.Context, p store.RunHeartbeatParams) (store.RunHeartbeatResult, error) {
	var res store.RunHeartbeatResult
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		now := ms(p.Now)
		r, err := ownedRun(ctx, tx, p.RunID, p.WorkerID, now, nil)
		if err != nil {
			return err
		}
		var hb, workerStop int
		if err := tx.QueryRowContext(ctx, `SELECT hb_timeout_s FROM tasks WHERE id = ?`, r.TaskID).Scan(&hb); err != nil {
			return fmt.Errorf("sqlitestore: heartbeat timeout of %s: %w", r.TaskID, err)
		}
		lease := now + int64(hb)*1000
		msg := r.Message
		if p.Message != "" {
			msg = p.Message
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET lease_expires_at = ?, expires_at = ?, message = ? WHERE id = ?`,
			lease, store.RunExpiresAt(lease, ms(r.Deadline)), msg, r.ID); err != nil {
			return fmt.Errorf("sqlitestore: renew lease of %s: %w", r.ID, err)
		}
		if err := tx.QueryRowContext(ctx, `UPDATE workers SET last_seen = ? WHERE id = ? RETURNING stop_requested`,
			now, p.WorkerID).Scan(&workerStop); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlitestore: worker seen: %w", err)
		}
		res = store.RunHeartbeatResult{Stop: r.StopRequested, Drain: workerStop == 1, LeaseExpiresAt: tm(lease), HeartbeatTimeoutSeconds: hb}
		return nil
	})
	return res, err
}

// RunComplete implements store.Store.
func (s *Store) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	var taskID string
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		now := ms(p.Now)
		r, err := ownedRun(ctx, tx, p.RunID, p.WorkerID, now, p.Backoff)
		if err != nil {
			return err
		}
		taskID = r.TaskID
		status, run := store.ReportSettle(p, r.StopRequested)
		if err := endRun(ctx, tx, r, status, p.Message, now); err != nil {
			return err
		}
		return settle(ctx, tx, r, run)
	})
	if err != nil {
		return nil, err
	}
	return s.taskWithRuns(ctx, taskID)
}

// endRun ends a RUNNING run.
func endRun(ctx context.Context, tx *wtx, r *runRow, status rota.Status, msg string, now int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET status = ?, end_time = ?, expires_at = 0, lease_expires_at = 0, message = ? WHERE id = ?`,
		string(status), now, msg, r.ID); err != nil {
		return fmt.Errorf("sqlitestore: end run %s: %w", r.ID, err)
	}
	r.Status = status
	return nil
}

// settle moves a task after one of its runs (r, already ended) ended with
// the given outcome.
func settle(ctx context.Context, tx *wtx, r *runRow, run store.SettleRun) error {
	t, err := getTask(ctx, tx, r.TaskID)
	if err != nil {
		return err
	}
	t.Running = max(t.Running-1, 0)
	now := ms(run.Now)
	if t.Done {
		// A straggler of a task that already ended: only the counter moves.
		_, err := tx.ExecContext(ctx, `UPDATE tasks SET running = ?, updated_at = ? WHERE id = ?`, t.Running, now, t.ID)
		return wrapErr("settle task", err)
	}
	st := t.Settle(run)
	var resultVal any
	if len(st.Result) > 0 {
		resultVal = string(st.Result)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET status = ?, done = ?, avail = ?, failures = ?, successes = ?,
		running = ?, run_at = ?, end_time = ?, message = ?, result = ?, updated_at = ? WHERE id = ?`,
		string(st.Status), boolInt(st.Done), boolInt(st.Avail), st.Failures, st.Successes, t.Running, ms(st.RunAt),
		ms(st.EndTime), st.Message, resultVal, now, t.ID); err != nil {
		return fmt.Errorf("sqlitestore: settle task %s: %w", t.ID, err)
	}
	if st.StopOthers {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET stop_requested = 1 WHERE task_id = ? AND status = 'RUNNING'`, t.ID); err != nil {
			return fmt.Errorf("sqlitestore: stop other runs of %s: %w", t.ID, err)
		}
	}
	return nil
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sqlitestore: %s: %w", what, err)
}

// expireRun ends a run whose lease or deadline passed at now as TIMEOUT.
func expireRun(ctx context.Context, tx *wtx, r *runRow, now int64, backoff func(int) time.Duration) error {
	msg, run := store.ExpirySettle(r.Deadline, tm(now), r.StopRequested, backoff)
	if err := endRun(ctx, tx, r, rota.StatusTimeout, msg, now); err != nil {
		return err
	}
	return settle(ctx, tx, r, run)
}

// RunExpire implements store.Store.
func (s *Store) RunExpire(ctx context.Context, p store.RunExpireParams) (store.RunExpireResult, error) {
	var res store.RunExpireResult
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		res = store.RunExpireResult{}
		if err := fence(ctx, tx, p.Term, p.Now); err != nil {
			return err
		}
		now := ms(p.Now)
		rows, err := tx.QueryContext(ctx, `SELECT id FROM runs WHERE status = 'RUNNING' AND expires_at <= ? ORDER BY expires_at, id LIMIT ?`, now, limit)
		if err != nil {
			return fmt.Errorf("sqlitestore: find expired runs: %w", err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			r, err := getRun(ctx, tx, id)
			if err != nil {
				return err
			}
			if err := expireRun(ctx, tx, r, now, p.Backoff); err != nil {
				return err
			}
			res.Add(r.TaskID, r.kind)
		}
		return nil
	})
	return res, err
}

// RunNextExpiry implements store.Store.
func (s *Store) RunNextExpiry(ctx context.Context) (time.Time, bool, error) {
	var v sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT MIN(expires_at) FROM runs WHERE status = 'RUNNING'`).Scan(&v); err != nil {
		return time.Time{}, false, fmt.Errorf("sqlitestore: next expiry: %w", err)
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return tm(v.Int64), true, nil
}
