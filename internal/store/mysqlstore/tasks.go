package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// curRunCols are the columns of the run a one-worker task carries in its
// row, in the order of curRun.dest.
const curRunCols = `run_id, run_worker, run_status, run_start, run_end, run_lease, run_deadline, run_stop, run_message`

// taskCols are the columns getTask reads.
const taskCols = store.TaskColumns + `, pinned, deps_waiting, dependents, ` + curRunCols

// curRun is the run in a task row (id "" when there is none).
type curRun struct {
	id, worker, status                string
	start, end, lease, deadline, stop int64
	message                           string
}

func (r *curRun) dest() []any {
	return []any{&r.id, &r.worker, &r.status, &r.start, &r.end, &r.lease, &r.deadline, &r.stop, &r.message}
}

// taskRow is a task as stored: the shared row plus this store's columns.
type taskRow struct {
	store.TaskRow
	pinned, depsWaiting, dependents int
	run                             curRun
}

// rotaRun is the task row's run as a rota.Run.
func (t *taskRow) rotaRun() rota.Run {
	r := t.run
	return rota.Run{ID: r.id, TaskID: t.ID, WorkerID: r.worker, WorkerAddress: t.WorkerAddress, Attempt: t.Attempt,
		Status: rota.Status(r.status), StartTime: tm(r.start), EndTime: tm(r.end), LeaseExpiresAt: tm(r.lease),
		Deadline: tm(r.deadline), StopRequested: r.stop == 1, Message: r.message}
}

// scanTask reads a row of taskCols.
func scanTask(sc scanner) (*taskRow, error) {
	var (
		ts        store.TaskScan
		workerIDs sql.NullString
		t         taskRow
	)
	if err := sc.Scan(ts.Dest(&workerIDs, append([]any{&t.pinned, &t.depsWaiting, &t.dependents}, t.run.dest()...)...)...); err != nil {
		return nil, err
	}
	ids, err := decodeWorkerIDs(workerIDs)
	if err != nil {
		return nil, err
	}
	t.TaskRow = ts.Row(ids)
	return &t, nil
}

func decodeWorkerIDs(v sql.NullString) ([]string, error) {
	if !v.Valid {
		return nil, nil
	}
	var ids []string
	if err := json.Unmarshal([]byte(v.String), &ids); err != nil {
		return nil, fmt.Errorf("decode worker_ids: %w", err)
	}
	return ids, nil
}

func workerIDsValue(ids []string) any {
	if len(ids) == 0 {
		return nil
	}
	b, _ := json.Marshal(ids)
	return string(b)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// getTask reads a task; with lock, FOR UPDATE.
func getTask(ctx context.Context, q queryer, id string, lock bool) (*taskRow, error) {
	query := `SELECT ` + taskCols + ` FROM tasks WHERE id = ?`
	if lock {
		query += ` FOR UPDATE`
	}
	t, err := scanTask(q.QueryRowContext(ctx, query, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("task", id)
	}
	return t, wrap("get task "+id, err)
}

// TaskInsert implements store.Store.
func (s *Store) TaskInsert(ctx context.Context, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	return store.InsertOne(ctx, p, s.TaskInsertMany)
}

// TaskInsertMany implements store.Store. Items without a key or
// dependencies go in multi-row INSERTs (written before the next item that
// needs them); the others one by one.
func (s *Store) TaskInsertMany(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	var out []store.TaskInsertResult
	err := s.tx(ctx, "insert tasks", func(t *txn) error {
		out = make([]store.TaskInsertResult, len(ps))
		var plain []store.TaskInsertParams
		for i, p := range ps {
			hasDeps := len(p.DependsOn) > 0 || len(p.DependsOnItems) > 0
			if p.Key == "" && !hasDeps {
				if err := s.ensureKind(t, p.Kind); err != nil {
					return err
				}
				out[i] = store.TaskInsertResult{Task: newTask(p)}
				plain = append(plain, p)
			} else {
				if err := insertRows(t, plain); err != nil {
					return err
				}
				plain = nil
				r, err := s.insertKeyed(t, p)
				if err == nil && !r.Existing && hasDeps {
					r, err = insertDeps(t, p, r, i, out[:i])
				}
				if err != nil {
					return err
				}
				out[i] = r
			}
			if r := out[i]; r.Task.Status == rota.StatusScheduled && (!r.Existing || r.Rerun) {
				t.notify(p.Kind, ms(r.Task.RunAt), ms(p.Now))
			}
		}
		return insertRows(t, plain)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// newTask is the task insert p stores.
func newTask(p store.TaskInsertParams) *rota.Task { return p.NewTask() }

// insertRows writes new task rows, in one statement.
func insertRows(t *txn, ps []store.TaskInsertParams) error {
	if len(ps) == 0 {
		return nil
	}
	args := make([]any, 0, 16*len(ps))
	for _, p := range ps {
		tk := newTask(p)
		args = append(args, p.ID, p.Kind, p.Priority.Level(), string(p.Payload), nullString(p.Key), p.MaxRetries, p.Workers,
			workerIDsValue(p.WorkerIDs), boolInt(len(p.WorkerIDs) > 0), p.TimeoutSeconds, p.HeartbeatTimeoutSeconds,
			ms(tk.CreatedAt), ms(tk.RunAt), p.ScheduleID, ms(p.FireTime), ms(tk.CreatedAt))
	}
	const row = `(?, ?, ?, ?, ?, 'SCHEDULED', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', '')`
	_, err := t.exec(`INSERT INTO tasks (id, kind, level, payload, "key", status, max_retries, workers,
		worker_ids, pinned, timeout_s, hb_timeout_s, created_at, run_at, schedule_id, fire_time, updated_at, message, run_message)
		VALUES `+strings.Repeat(row+", ", len(ps)-1)+row, args...)
	if err != nil && ps[0].Key != "" {
		// A concurrent insert of the same key won: run again, to answer
		// its task.
		err = retryOnDuplicate(err)
	}
	return wrap("insert tasks", err)
}

// insertKeyed inserts one task that may have a key: the task holding the
// key answers (or is rerun) instead.
func (s *Store) insertKeyed(t *txn, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	if p.Key != "" {
		row, err := scanTask(t.QueryRowContext(t.ctx, `SELECT `+taskCols+` FROM tasks WHERE kind = ? AND held_key = ? FOR UPDATE`, p.Kind, p.Key))
		switch {
		case err == nil && row.Done && p.RerunIfFinished:
			return rerunTask(t, row, p)
		case err == nil:
			return store.TaskInsertResult{Task: &row.Task, Existing: true}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return store.TaskInsertResult{}, wrap("look up key", err)
		}
	}
	if err := s.ensureKind(t, p.Kind); err != nil {
		return store.TaskInsertResult{}, err
	}
	if err := insertRows(t, []store.TaskInsertParams{p}); err != nil {
		return store.TaskInsertResult{}, err
	}
	return store.TaskInsertResult{Task: newTask(p)}, nil
}

// rerunTask makes the finished task row claimable again under its id for
// insert p (RerunIfFinished): its runs are deleted and it starts afresh.
func rerunTask(t *txn, row *taskRow, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	now := ms(p.Now)
	runAt := ms(p.RunAt)
	if runAt == 0 {
		runAt = now
	}
	if _, err := t.exec(`DELETE FROM run_history WHERE task_id = ?`, row.ID); err != nil {
		return store.TaskInsertResult{}, wrap("rerun: clear runs", err)
	}
	_, err := t.exec(`UPDATE tasks SET status = 'SCHEDULED', done = 0, avail = 1, held = 0, deps_waiting = 0, attempt = 0,
		failures = 0, successes = 0, running = 0, stop_requested = 0, run_at = ?, start_time = 0, end_time = 0,
		worker_address = '', message = '', result = NULL, skip_reason = '', updated_at = ?, run_id = '', run_worker = '',
		run_status = '', run_start = 0, run_end = 0, run_lease = 0, run_deadline = 0, run_stop = 0, run_message = '',
		run_live = NULL WHERE id = ?`, runAt, now, row.ID)
	if err != nil {
		return store.TaskInsertResult{}, wrap("rerun "+row.ID, err)
	}
	r, err := getTask(t.ctx, t, row.ID, false)
	if err != nil {
		return store.TaskInsertResult{}, err
	}
	return store.TaskInsertResult{Task: &r.Task, Existing: true, Rerun: true}, nil
}

// ensureKind creates kind with default settings if it does not exist.
// Kinds are never deleted, so once seen to exist a kind is remembered.
func (s *Store) ensureKind(t *txn, kind string) error {
	if _, ok := s.kinds.Load(kind); ok {
		return nil
	}
	var one int
	err := t.QueryRowContext(t.ctx, `SELECT 1 FROM kinds WHERE name = ?`, kind).Scan(&one)
	switch {
	case err == nil:
		s.kinds.Store(kind, struct{}{})
		return nil
	case !errors.Is(err, sql.ErrNoRows):
		return wrap("look up kind "+kind, err)
	}
	_, err = t.exec(`INSERT IGNORE INTO kinds (name) VALUES (?)`, kind)
	return wrap("create kind "+kind, err)
}

// insertDeps records the dependencies of the task r just inserted for
// item i of an insert (prior: the results of the earlier items) and
// starts it WAITING, or CANCELED when one has already failed.
func insertDeps(t *txn, p store.TaskInsertParams, r store.TaskInsertResult, i int, prior []store.TaskInsertResult) (store.TaskInsertResult, error) {
	ids, err := store.DepIDs(p, i, prior)
	if err != nil {
		return r, err
	}
	rows, err := t.QueryContext(t.ctx, `SELECT id, status FROM tasks WHERE id IN (`+inList(len(ids))+`) FOR UPDATE`, anyList(ids)...)
	pairs, err := collect(rows, err, "read dependencies", func(sc scanner) ([2]string, error) {
		var v [2]string
		err := sc.Scan(&v[0], &v[1])
		return v, err
	})
	if err != nil {
		return r, err
	}
	status := make(map[string]rota.Status, len(pairs))
	for _, pr := range pairs {
		status[pr[0]] = rota.Status(pr[1])
	}
	st, err := store.StartWithDeps(i, ids, status)
	if err != nil {
		return r, err
	}
	vals, args := "", []any{}
	for j, id := range ids {
		if j > 0 {
			vals += ", "
		}
		vals += "(?, ?)"
		args = append(args, r.Task.ID, id)
	}
	if _, err := t.exec(`INSERT INTO task_deps (task_id, dep_id) VALUES `+vals, args...); err != nil {
		return r, wrap("insert dependencies", err)
	}
	if _, err := t.exec(`UPDATE tasks SET dependents = dependents + 1 WHERE id IN (`+inList(len(ids))+`)`, anyList(ids)...); err != nil {
		return r, wrap("count dependents", err)
	}
	now := ms(p.Now)
	switch {
	case st.Failed != "":
		_, err = t.exec(`UPDATE tasks SET status = 'CANCELED', done = 1, avail = 0, end_time = ?, message = ?,
			updated_at = ? WHERE id = ?`, now, st.Failed, now, r.Task.ID)
	case st.Waiting > 0:
		_, err = t.exec(`UPDATE tasks SET status = 'WAITING', avail = 0, deps_waiting = ?, updated_at = ? WHERE id = ?`,
			st.Waiting, now, r.Task.ID)
	}
	if err != nil {
		return r, wrap("start task "+r.Task.ID+" after its dependencies", err)
	}
	row, err := getTask(t.ctx, t, r.Task.ID, false)
	if err != nil {
		return r, err
	}
	row.DependsOn = ids
	r.Task = &row.Task
	return r, nil
}

// depsEnded settles the dependents of task id, which just ended with
// status at now: a success releases those it was the last wait of; any
// other end cancels its WAITING dependents, and theirs in turn. Only
// called for a task whose dependents count is above 0.
func depsEnded(t *txn, id string, status rota.Status, now int64) error {
	if status == rota.StatusSuccess {
		rows, err := t.QueryContext(t.ctx, `SELECT t.id, t.kind, t.deps_waiting, t.run_at FROM tasks t JOIN task_deps d ON d.task_id = t.id
			WHERE d.dep_id = ? AND t.status = 'WAITING' FOR UPDATE`, id)
		type child struct {
			id, kind string
			waiting  int
			runAt    int64
		}
		kids, err := collect(rows, err, "dependents", func(sc scanner) (child, error) {
			var c child
			err := sc.Scan(&c.id, &c.kind, &c.waiting, &c.runAt)
			return c, err
		})
		if err != nil || len(kids) == 0 {
			return err
		}
		if _, err := t.exec(`UPDATE tasks t JOIN task_deps d ON d.task_id = t.id
			SET t.status = CASE WHEN t.deps_waiting = 1 THEN 'SCHEDULED' ELSE t.status END,
				t.avail = CASE WHEN t.deps_waiting = 1 THEN 1 ELSE 0 END,
				t.deps_waiting = t.deps_waiting - 1, t.updated_at = ?
			WHERE d.dep_id = ? AND t.status = 'WAITING'`, now, id); err != nil {
			return wrap("release dependents", err)
		}
		for _, c := range kids {
			if c.waiting == 1 {
				t.notifySelf(c.kind, c.runAt, now)
			}
		}
		return nil
	}
	return cancelDependents(t, []string{id}, now)
}

// cancelDependents cancels the WAITING dependents of the tasks ids (which
// ended without success), down the chain.
func cancelDependents(t *txn, ids []string, now int64) error {
	for len(ids) > 0 {
		id := ids[0]
		ids = ids[1:]
		var status string
		if err := t.QueryRowContext(t.ctx, `SELECT status FROM tasks WHERE id = ?`, id).Scan(&status); err != nil {
			return wrap("dependency status", err)
		}
		rows, err := t.QueryContext(t.ctx, `SELECT t.id FROM tasks t JOIN task_deps d ON d.task_id = t.id
			WHERE d.dep_id = ? AND t.status = 'WAITING' ORDER BY t.id FOR UPDATE`, id)
		kids, err := strings1(rows, err, "dependents")
		if err != nil || len(kids) == 0 {
			if err != nil {
				return err
			}
			continue
		}
		if _, err := t.exec(`UPDATE tasks SET status = 'CANCELED', done = 1, avail = 0, end_time = ?, message = ?,
			updated_at = ? WHERE id IN (`+inList(len(kids))+`)`,
			append([]any{now, store.DepFailedMessage(id, rota.Status(status)), now}, anyList(kids)...)...); err != nil {
			return wrap("cancel dependents", err)
		}
		ids = append(ids, kids...)
	}
	return nil
}

// taskLinks reads the dependents (children) of task id and, with
// withParents, its dependencies (parents), by id.
func taskLinks(ctx context.Context, q queryer, id string, withParents bool) (parents, children []string, err error) {
	rows, err := q.QueryContext(ctx, `SELECT task_id FROM task_deps WHERE dep_id = ? ORDER BY task_id`, id)
	if children, err = strings1(rows, err, "dependents of "+id); err != nil || !withParents {
		return nil, children, err
	}
	rows, err = q.QueryContext(ctx, `SELECT dep_id FROM task_deps WHERE task_id = ? ORDER BY dep_id`, id)
	parents, err = strings1(rows, err, "dependencies of "+id)
	return parents, children, err
}

// TaskGet implements store.Store.
func (s *Store) TaskGet(ctx context.Context, id string) (*rota.Task, error) {
	t, err := getTask(ctx, s.r, id, false)
	if err != nil {
		return nil, unavailable(err)
	}
	if err := withRuns(ctx, s.r, t); err != nil {
		return nil, err
	}
	if t.DependsOn, t.Dependents, err = taskLinks(ctx, s.r, id, true); err != nil {
		return nil, err
	}
	return &t.Task, nil
}

// withRuns sets t's Runs: its history (read only when there can be one)
// and the run in its row.
func withRuns(ctx context.Context, q queryer, t *taskRow) error {
	t.Runs = nil
	if t.Workers > 1 || t.Attempt > 1 || t.run.id == "" && t.Attempt > 0 {
		rows, err := q.QueryContext(ctx, `SELECT `+store.RunColumns+` FROM run_history WHERE task_id = ? ORDER BY id`, t.ID)
		runs, err := collect(rows, err, "runs of "+t.ID, func(sc scanner) (rota.Run, error) {
			var rs store.RunScan
			err := sc.Scan(rs.Dest()...)
			return rs.Run(), err
		})
		if err != nil {
			return err
		}
		t.Runs = runs
	}
	if t.run.id != "" {
		t.Runs = append(t.Runs, t.rotaRun())
	}
	return nil
}

// TaskList implements store.Store.
func (s *Store) TaskList(ctx context.Context, p store.TaskListParams) (store.TaskListResult, error) {
	q, args, limit := store.TaskListQuery(p, func(int) string { return "?" })
	rows, err := s.r.QueryContext(ctx, q, args...)
	tasks, err := collect(rows, err, "list tasks", func(sc scanner) (rota.Task, error) {
		var ts store.TaskScan
		var ids sql.NullString
		if err := sc.Scan(ts.Dest(&ids)...); err != nil {
			return rota.Task{}, err
		}
		wids, err := decodeWorkerIDs(ids)
		return ts.Row(wids).Task, err
	})
	if err != nil {
		return store.TaskListResult{}, unavailable(err)
	}
	return p.Page(tasks, limit), nil
}

// TaskCountByStatus implements store.Store.
func (s *Store) TaskCountByStatus(ctx context.Context, p store.TaskListParams) (map[rota.Status]int, error) {
	q, args := store.TaskCountQuery(p, func(int) string { return "?" })
	rows, err := s.r.QueryContext(ctx, q, args...)
	type count struct {
		status string
		n      int
	}
	counts, err := collect(rows, err, "count tasks", func(sc scanner) (count, error) {
		var c count
		err := sc.Scan(&c.status, &c.n)
		return c, err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	out := map[rota.Status]int{}
	for _, c := range counts {
		out[rota.Status(c.status)] = c.n
	}
	return out, nil
}

// TaskUpdate implements store.Store.
func (s *Store) TaskUpdate(ctx context.Context, p store.TaskUpdateParams) (*rota.Task, error) {
	err := s.tx(ctx, "update task", func(t *txn) error {
		row, err := getTask(t.ctx, t, p.ID, true)
		if err != nil {
			return err
		}
		stopDisallowed, err := p.ApplyTo(&row.TaskRow)
		if err != nil {
			return err
		}
		runStop := row.run.stop
		if stopDisallowed {
			if row.run.status == string(rota.StatusRunning) && !slices.Contains(row.WorkerIDs, row.run.worker) {
				runStop = 1
			}
			if row.Workers > 1 {
				if _, err := t.exec(`UPDATE run_history SET stop_requested = 1 WHERE task_id = ? AND status = 'RUNNING'
					AND worker_id NOT IN (`+inList(len(row.WorkerIDs))+`)`, append([]any{row.ID}, anyList(row.WorkerIDs)...)...); err != nil {
					return wrap("stop disallowed runs", err)
				}
			}
		}
		now := ms(p.Now)
		if _, err := t.exec(`UPDATE tasks SET level = ?, max_retries = ?, hb_timeout_s = ?, worker_ids = ?, pinned = ?,
			run_stop = ?, updated_at = ? WHERE id = ?`, row.Priority.Level(), row.MaxRetries, row.HeartbeatTimeoutSeconds,
			workerIDsValue(row.WorkerIDs), boolInt(len(row.WorkerIDs) > 0), runStop, now, row.ID); err != nil {
			return wrap("update task "+row.ID, err)
		}
		if row.Avail && !row.StopRequested {
			t.notify(row.Kind, ms(row.RunAt), now)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.TaskGet(ctx, p.ID)
}

// TaskStop implements store.Store.
func (s *Store) TaskStop(ctx context.Context, p store.TaskStopParams) (*rota.Task, error) {
	err := s.tx(ctx, "stop task", func(t *txn) error {
		row, err := getTask(t.ctx, t, p.ID, true)
		if err != nil {
			return err
		}
		msg, err := p.MessageFor(&row.TaskRow)
		if err != nil {
			return err
		}
		now := ms(p.Now)
		if row.Running == 0 {
			if _, err = t.exec(`UPDATE tasks SET status = 'CANCELED', done = 1, avail = 0, stop_requested = 1,
				end_time = ?, message = ?, updated_at = ? WHERE id = ?`, now, msg, now, row.ID); err != nil {
				return wrap("stop task "+row.ID, err)
			}
			if row.dependents > 0 {
				return depsEnded(t, row.ID, rota.StatusCanceled, now)
			}
			return nil
		}
		if row.Workers > 1 {
			if _, err = t.exec(`UPDATE run_history SET stop_requested = 1 WHERE task_id = ? AND status = 'RUNNING'`, row.ID); err != nil {
				return wrap("stop runs of "+row.ID, err)
			}
		}
		_, err = t.exec(`UPDATE tasks SET stop_requested = 1, avail = 0, message = ?, updated_at = ?,
			run_stop = CASE WHEN run_status = 'RUNNING' THEN 1 ELSE run_stop END WHERE id = ?`, msg, now, row.ID)
		return wrap("stop task "+row.ID, err)
	})
	if err != nil {
		return nil, err
	}
	return s.TaskGet(ctx, p.ID)
}

// TaskNextRunAt implements store.Store.
func (s *Store) TaskNextRunAt(ctx context.Context, kinds []string, now time.Time) (time.Time, bool, error) {
	if len(kinds) == 0 {
		return time.Time{}, false, nil
	}
	var v sql.NullInt64
	if err := s.r.QueryRowContext(ctx, `SELECT MIN(run_at) FROM tasks WHERE kind IN (`+inList(len(kinds))+`)
		AND avail = 1 AND run_at > ?`, append(anyList(kinds), ms(now))...).Scan(&v); err != nil {
		return time.Time{}, false, unavailable(wrap("next run_at", err))
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return tm(v.Int64), true, nil
}
