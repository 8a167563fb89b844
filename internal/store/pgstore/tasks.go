package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

const taskCols = store.TaskColumns

// taskRow is a task as stored, with the bookkeeping the domain type hides.
type taskRow struct {
	store.TaskRow
	kindCap int // the kind's MaxRunning, when loaded (lockTaskOfRun)
	// Whether it has dependencies or dependents, when loaded
	// (lockTaskOfRun; loaded as false otherwise).
	hasDeps bool
}

// scanTask reads the taskCols of a row, plus extra destinations after them.
func scanTask(row pgx.Row, extra ...any) (*taskRow, error) {
	var (
		sc        store.TaskScan
		workerIDs []string
	)
	if err := row.Scan(sc.Dest(&workerIDs, extra...)...); err != nil {
		return nil, err
	}
	return &taskRow{TaskRow: sc.Row(workerIDs)}, nil
}

// taskWithRunsSQL reads a task and its runs in one statement (one
// snapshot); tasksWithRunsSQL reads several (an array of ids).
const (
	taskWithRunsSQL  = tasksWithRunsSelect + `WHERE id = $1`
	tasksWithRunsSQL = tasksWithRunsSelect + `WHERE id = ANY ($1)`
)

const tasksWithRunsSelect = `SELECT ` + taskCols + `,
	COALESCE((SELECT json_agg(json_build_object(
		'id', r.id, 'task_id', r.task_id, 'worker_id', r.worker_id, 'worker_address', r.worker_address,
		'attempt', r.attempt, 'status', r.status, 'start_time', r.start_time, 'end_time', r.end_time,
		'lease_expires_at', r.lease_expires_at, 'deadline', r.deadline, 'stop_requested', r.stop_requested,
		'message', r.message) ORDER BY r.id) FROM runs r WHERE r.task_id = tasks.id), '[]'),
	ARRAY(SELECT d.dep_id FROM task_deps d WHERE d.task_id = tasks.id ORDER BY d.dep_id),
	ARRAY(SELECT d.task_id FROM task_deps d WHERE d.dep_id = tasks.id ORDER BY d.task_id)
	FROM tasks `

// runJSON is one run as taskWithRunsSQL renders it.
type runJSON struct {
	ID             string      `json:"id"`
	TaskID         string      `json:"task_id"`
	WorkerID       string      `json:"worker_id"`
	WorkerAddress  string      `json:"worker_address"`
	Attempt        int         `json:"attempt"`
	Status         rota.Status `json:"status"`
	StartTime      int64       `json:"start_time"`
	EndTime        int64       `json:"end_time"`
	LeaseExpiresAt int64       `json:"lease_expires_at"`
	Deadline       int64       `json:"deadline"`
	StopRequested  bool        `json:"stop_requested"`
	Message        string      `json:"message"`
}

// scanTaskWithRuns decodes a row of taskWithRunsSQL: a task with its runs,
// oldest first.
func scanTaskWithRuns(row pgx.Row, id string) (*rota.Task, error) {
	var (
		runs              []byte
		parents, children []string
	)
	t, err := scanTask(row, &runs, &parents, &children)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("task", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	var rs []runJSON
	if err := json.Unmarshal(runs, &rs); err != nil {
		return nil, fmt.Errorf("decode runs of task %s: %w", id, err)
	}
	if len(rs) > 0 {
		t.Runs = make([]rota.Run, len(rs))
	}
	for i, r := range rs {
		t.Runs[i] = rota.Run{
			ID: r.ID, TaskID: r.TaskID, WorkerID: r.WorkerID, WorkerAddress: r.WorkerAddress, Attempt: r.Attempt,
			Status: r.Status, StartTime: tm(r.StartTime), EndTime: tm(r.EndTime), LeaseExpiresAt: tm(r.LeaseExpiresAt),
			Deadline: tm(r.Deadline), StopRequested: r.StopRequested, Message: r.Message,
		}
	}
	if len(parents) > 0 {
		t.DependsOn = parents
	}
	if len(children) > 0 {
		t.Dependents = children
	}
	return &t.Task, nil
}

// queueTaskWithRuns queues the read of a task with its runs into *out, as
// the transaction sees it at that point of the queue.
func queueTaskWithRuns(t *txn, id string, out **rota.Task) {
	t.queue(taskWithRunsSQL, id).QueryRow(func(row pgx.Row) error {
		task, err := scanTaskWithRuns(row, id)
		*out = task
		return err
	})
}

// lockTask locks a task (FOR NO KEY UPDATE: every change of a task or of
// its runs holds it) and returns it.
func lockTask(ctx context.Context, t *txn, id string) (*taskRow, error) {
	var row *taskRow
	err := t.queryRow(ctx, func(r pgx.Row) (err error) {
		row, err = scanTask(r)
		return err
	}, `SELECT `+taskCols+` FROM tasks WHERE id = $1 FOR NO KEY UPDATE`, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound("task", id)
	}
	if err != nil {
		return nil, fmt.Errorf("lock task %s: %w", id, err)
	}
	return row, nil
}

// nullString is s, or NULL when empty.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullJSON is j, or NULL when empty.
func nullJSON(j json.RawMessage) any {
	if len(j) == 0 {
		return nil
	}
	return string(j)
}

// idList is ids, never nil (worker_ids is NOT NULL; empty means any).
func idList(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// TaskInsert implements store.Store.
func (s *Store) TaskInsert(ctx context.Context, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	res, err := s.TaskInsertMany(ctx, []store.TaskInsertParams{p})
	if err != nil {
		return store.TaskInsertResult{}, err
	}
	return res[0], nil
}

const insertTaskSQL = `INSERT INTO tasks (id, kind, level, payload, key, status, max_retries, workers, worker_ids,
	timeout_s, hb_timeout_s, created_at, run_at, schedule_id, fire_time, updated_at)
	VALUES ($1, $2, $3, $4::json, $5, 'SCHEDULED', $6, $7, $8, $9, $10, $11, $12, $13, $14, $11)
	ON CONFLICT (kind, key) WHERE key IS NOT NULL AND key_held DO NOTHING`

// maxKeyRetries bounds the insert-or-fetch loop of a keyed insert: the
// task holding the key may be cleaned between our insert attempt and our
// read of it, which then finds nothing and inserts again.
const maxKeyRetries = 16

// TaskInsertMany implements store.Store. Small requests of unkeyed tasks
// (a single submit, a small batch) are committed in groups with the
// requests that arrive together (insert.go); the others in a transaction
// of their own (insertNoDeps: one COPY, or insertTx).
func (s *Store) TaskInsertMany(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	if hasDeps(ps) {
		return s.insertDepsTx(ctx, ps)
	}
	if groupable(ps) {
		return s.insertGrouped(ctx, ps)
	}
	return s.insertNoDeps(ctx, ps)
}

// insertTx inserts ps in one transaction. The tasks are inserted in one
// pipelined batch; those whose key is held by a task (ON CONFLICT DO
// NOTHING on tasks_held_key) are then fetched — and run again when
// finished and asked to — or inserted again if that task was cleaned
// meanwhile. A concurrent insert of the same key waits
// on the index entry of the other until that commits or rolls back, so
// exactly one task results.
func (s *Store) insertTx(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	out := make([]store.TaskInsertResult, len(ps))
	err := s.tx(ctx, "insert tasks", func(t *txn) error {
		clear(out)
		kinds := make([]string, len(ps))
		for i, p := range ps {
			kinds[i] = p.Kind
		}
		t.upsertKinds(kinds)
		inserted := make([]bool, len(ps))
		keyed := false
		// In (kind, key) order, stably: concurrent batches that share keys
		// then wait for each other's index entries in one order rather
		// than deadlock, and of two equal keys in a batch the first given
		// is the one inserted.
		order := make([]int, len(ps))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			return cmp.Or(strings.Compare(ps[a].Kind, ps[b].Kind), strings.Compare(ps[a].Key, ps[b].Key))
		})
		for _, p := range ps {
			keyed = keyed || p.Key != ""
		}
		if !keyed && len(ps) > 1 {
			queueInsertBatch(t, ps)
		} else {
			for _, i := range order {
				t.queue(insertTaskSQL, insertArgs(ps[i])...).Exec(func(ct pgconn.CommandTag) error {
					inserted[i] = ct.RowsAffected() == 1
					return nil
				})
			}
		}
		if !keyed {
			// Every row inserts or the transaction fails: nothing to read
			// before the commit, which carries the inserts.
			for i, p := range ps {
				out[i] = store.TaskInsertResult{Task: insertedTask(p)}
				t.notify(p.Kind, ms(out[i].Task.RunAt), ms(p.Now))
			}
			return nil
		}
		if err := t.flush(ctx); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		for _, i := range order {
			p := ps[i]
			if inserted[i] {
				out[i] = store.TaskInsertResult{Task: insertedTask(p)}
				continue
			}
			r, err := insertKeyed(ctx, t, p)
			if err != nil {
				return err
			}
			out[i] = r
		}
		for i, p := range ps {
			if !out[i].Existing || out[i].Rerun {
				t.notify(p.Kind, ms(out[i].Task.RunAt), ms(p.Now))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// hasDeps reports whether a task of ps has dependencies.
func hasDeps(ps []store.TaskInsertParams) bool {
	for _, p := range ps {
		if len(p.DependsOn) > 0 || len(p.DependsOnItems) > 0 {
			return true
		}
	}
	return false
}

// insertDepsTx inserts ps, some with dependencies, in one transaction,
// one after the other in input order (an item may depend on an earlier
// one).
func (s *Store) insertDepsTx(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	out := make([]store.TaskInsertResult, len(ps))
	err := s.tx(ctx, "insert tasks", func(t *txn) error {
		clear(out)
		kinds := make([]string, len(ps))
		for i, p := range ps {
			kinds[i] = p.Kind
		}
		t.upsertKinds(kinds)
		for i, p := range ps {
			r, err := insertKeyed(ctx, t, p)
			if err != nil {
				return err
			}
			if !r.Existing && (len(p.DependsOn) > 0 || len(p.DependsOnItems) > 0) {
				if r, err = insertDeps(ctx, t, p, r, i, out[:i]); err != nil {
					return err
				}
			}
			out[i] = r
			if (!r.Existing || r.Rerun) && r.Task.Status == rota.StatusScheduled {
				t.notify(p.Kind, ms(r.Task.RunAt), ms(p.Now))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// insertDeps records the dependencies of the task r just inserted for
// item i (prior: the results of the earlier items) and starts it WAITING,
// or CANCELED when one has already failed. The dependencies are locked
// (FOR NO KEY UPDATE: their dependents count goes up): one settling
// concurrently waits for this transaction, whose links its trigger then
// sees (the count lets it run), or has committed and is read settled.
func insertDeps(ctx context.Context, t *txn, p store.TaskInsertParams, r store.TaskInsertResult, i int,
	prior []store.TaskInsertResult) (store.TaskInsertResult, error) {
	ids, err := store.DepIDs(p, i, prior)
	if err != nil {
		return r, err
	}
	status := make(map[string]rota.Status, len(ids))
	err = t.query(ctx, func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				id string
				s  rota.Status
			)
			if err := rows.Scan(&id, &s); err != nil {
				return err
			}
			status[id] = s
		}
		return rows.Err()
	}, `SELECT id, status FROM tasks WHERE id = ANY ($1) ORDER BY id FOR NO KEY UPDATE`, ids)
	if err != nil {
		return r, fmt.Errorf("read dependencies: %w", err)
	}
	st, err := store.StartWithDeps(i, ids, status)
	if err != nil {
		return r, err
	}
	now := ms(p.Now)
	t.queue(`INSERT INTO task_deps (task_id, dep_id) SELECT $1, d FROM unnest($2::text[]) AS d`, r.Task.ID, ids)
	t.queue(`UPDATE tasks SET dependents = dependents + 1 WHERE id = ANY ($1)`, ids)
	switch {
	case st.Failed != "":
		t.queue(`UPDATE tasks SET status = 'CANCELED', avail = false, end_time = $1, message = $2, updated_at = $1,
			parents = $4 WHERE id = $3`, now, st.Failed, r.Task.ID, len(ids))
	case st.Waiting > 0:
		t.queue(`UPDATE tasks SET status = 'WAITING', avail = false, deps_waiting = $1, updated_at = $2, parents = $4
			WHERE id = $3`, st.Waiting, now, r.Task.ID, len(ids))
	default:
		t.queue(`UPDATE tasks SET parents = $1 WHERE id = $2`, len(ids), r.Task.ID)
	}
	var row *taskRow
	t.queue(`SELECT `+taskCols+` FROM tasks WHERE id = $1`, r.Task.ID).QueryRow(func(rw pgx.Row) (err error) {
		row, err = scanTask(rw)
		return err
	})
	if err := t.flush(ctx); err != nil {
		return r, fmt.Errorf("start task %s after its dependencies: %w", r.Task.ID, err)
	}
	row.DependsOn = ids
	r.Task = &row.Task
	return r, nil
}

// queueInsertBatch queues the insert of unkeyed tasks in one statement
// (insertBatch).
func queueInsertBatch(t *txn, ps []store.TaskInsertParams) {
	sql, args := insertBatch(ps)
	t.queue(sql, args...)
}

// insertBatch is the insert of unkeyed tasks in one statement (rows from
// arrays): one statement to parse, plan and execute however many tasks,
// rather than one each.
func insertBatch(ps []store.TaskInsertParams) (string, []any) {
	n := len(ps)
	var (
		ids, kinds, wids, scheds        = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		payloads                        = make([]*string, n)
		levels                          = make([]int16, n)
		retries, workers, timeouts, hbs = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		created, runAt, fire            = make([]int64, n), make([]int64, n), make([]int64, n)
	)
	for i, p := range ps {
		ids[i], kinds[i], scheds[i] = p.ID, p.Kind, p.ScheduleID
		if len(p.Payload) > 0 {
			s := string(p.Payload)
			payloads[i] = &s
		}
		if len(p.WorkerIDs) > 0 {
			b, _ := json.Marshal(p.WorkerIDs) // []string always encodes
			wids[i] = string(b)
		}
		levels[i] = int16(p.Priority.Level())
		retries[i], workers[i], timeouts[i], hbs[i] = int32(p.MaxRetries), int32(p.Workers), int32(p.TimeoutSeconds),
			int32(p.HeartbeatTimeoutSeconds)
		created[i], runAt[i], fire[i] = ms(p.Now), ms(p.RunAt), ms(p.FireTime)
		if runAt[i] == 0 {
			runAt[i] = created[i]
		}
	}
	return insertBatchSQL, []any{ids, kinds, levels, payloads, retries, workers, wids, timeouts, hbs, created, runAt, scheds, fire}
}

const insertBatchSQL = `INSERT INTO tasks (id, kind, level, payload, status, max_retries, workers, worker_ids,
		timeout_s, hb_timeout_s, created_at, run_at, schedule_id, fire_time, updated_at)
	SELECT u.id, u.kind, u.level, u.payload::json, 'SCHEDULED', u.max_retries, u.workers,
		CASE WHEN u.wids = '' THEN '{}'::text[] ELSE ARRAY(SELECT json_array_elements_text(u.wids::json)) END,
		u.timeout_s, u.hb, u.created, u.run_at, u.sched, u.fire, u.created
	FROM unnest($1::text[], $2::text[], $3::smallint[], $4::text[], $5::int[], $6::int[], $7::text[],
			$8::int[], $9::int[], $10::bigint[], $11::bigint[], $12::text[], $13::bigint[])
		AS u(id, kind, level, payload, max_retries, workers, wids, timeout_s, hb, created, run_at, sched, fire)`

func insertArgs(p store.TaskInsertParams) []any {
	now := ms(p.Now)
	runAt := ms(p.RunAt)
	if runAt == 0 {
		runAt = now
	}
	return []any{p.ID, p.Kind, p.Priority.Level(), nullJSON(p.Payload), nullString(p.Key), p.MaxRetries, p.Workers,
		idList(p.WorkerIDs), p.TimeoutSeconds, p.HeartbeatTimeoutSeconds, now, runAt, p.ScheduleID, ms(p.FireTime)}
}

// insertedTask is the task p stored.
func insertedTask(p store.TaskInsertParams) *rota.Task { return p.NewTask() }

// insertKeyed returns the task holding p's key (run again if finished and
// p.RerunIfFinished), or inserts p if there is none any more.
func insertKeyed(ctx context.Context, t *txn, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	lookup := `SELECT ` + taskCols + ` FROM tasks WHERE kind = $1 AND key = $2 AND key_held`
	if p.RerunIfFinished {
		// Locked: of concurrent reruns one applies, the others then read
		// the task unfinished.
		lookup += ` FOR UPDATE`
	}
	for range maxKeyRetries {
		var row *taskRow
		err := t.queryRow(ctx, func(r pgx.Row) (err error) {
			row, err = scanTask(r)
			return err
		}, lookup, p.Kind, p.Key)
		switch {
		case err == nil && row.Done && p.RerunIfFinished:
			return rerunTask(ctx, t, row, p)
		case err == nil:
			return store.TaskInsertResult{Task: &row.Task, Existing: true}, nil
		case !errors.Is(err, pgx.ErrNoRows):
			return store.TaskInsertResult{}, fmt.Errorf("look up key %q of kind %s: %w", p.Key, p.Kind, err)
		}
		var done bool
		t.queue(insertTaskSQL, insertArgs(p)...).Exec(func(ct pgconn.CommandTag) error {
			done = ct.RowsAffected() == 1
			return nil
		})
		if err := t.flush(ctx); err != nil {
			return store.TaskInsertResult{}, fmt.Errorf("insert task: %w", err)
		}
		if done {
			return store.TaskInsertResult{Task: insertedTask(p)}, nil
		}
	}
	return store.TaskInsertResult{}, rota.Errorf(rota.CodeUnavailable, "key %q of kind %s keeps changing hands; try again", p.Key, p.Kind)
}

// rerunTask makes the finished (and locked) task row claimable again under
// its id for insert p: its runs are deleted and it starts afresh.
func rerunTask(ctx context.Context, t *txn, row *taskRow, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	now := ms(p.Now)
	runAt := ms(p.RunAt)
	if runAt == 0 {
		runAt = now
	}
	t.queue(`DELETE FROM run_log WHERE task_id = $1`, row.ID)
	t.queue(`UPDATE tasks SET status = 'SCHEDULED', avail = true, held = false, deps_waiting = 0, attempt = 0, failures = 0,
		successes = 0, running = 0, holders = '{}', stop_requested = false, run_at = $2, start_time = 0,
		end_time = 0, worker_address = '', message = '', result = NULL, skip_reason = '', updated_at = $3,
		run_id = NULL, run_worker = '', run_status = '', run_start = 0, run_end = 0, run_lease = 0, run_deadline = 0,
		run_stop = false, run_message = ''
		WHERE id = $1`, row.ID, runAt, now)
	if err := t.flush(ctx); err != nil {
		return store.TaskInsertResult{}, fmt.Errorf("rerun task %s: %w", row.ID, err)
	}
	var again *taskRow
	err := t.queryRow(ctx, func(r pgx.Row) (err error) {
		again, err = scanTask(r)
		return err
	}, `SELECT `+taskCols+` FROM tasks WHERE id = $1`, row.ID)
	if err != nil {
		return store.TaskInsertResult{}, fmt.Errorf("read rerun task %s: %w", row.ID, err)
	}
	return store.TaskInsertResult{Task: &again.Task, Existing: true, Rerun: true}, nil
}

// TaskGet implements store.Store.
func (s *Store) TaskGet(ctx context.Context, id string) (*rota.Task, error) {
	t, err := scanTaskWithRuns(s.pool.QueryRow(ctx, taskWithRunsSQL, id), id)
	if err != nil {
		return nil, s.translate("get task", err)
	}
	return t, nil
}

// statusListPred is the predicate of tasks_status_list (migration 0012),
// as a list statement repeats it.
const statusListPred = `status <> 'SUCCESS' AND status <> 'RUNNING'`

// listStatusHint is the store.StatusHint of TaskList: the predicate of
// tasks_status_list when none of statuses is SUCCESS or RUNNING; for
// RUNNING alone, the tasks of RUNNING runs (a RUNNING task has one: the
// invariant "RUNNING task without running runs" of Check), which
// tasks_running and run_log's partial indexes find; else nothing, and the
// list reads the primary key.
func listStatusHint(statuses []rota.Status) string {
	running := false
	for _, st := range statuses {
		switch st {
		case rota.StatusSuccess:
			return ""
		case rota.StatusRunning:
			running = true
		}
	}
	if !running {
		return statusListPred
	}
	if slices.ContainsFunc(statuses, func(st rota.Status) bool { return st != rota.StatusRunning }) {
		return ""
	}
	return `id IN (SELECT task_id FROM runs WHERE status = 'RUNNING')`
}

// TaskList implements store.Store.
func (s *Store) TaskList(ctx context.Context, p store.TaskListParams) (store.TaskListResult, error) {
	q, args, limit := store.TaskListQueryHinted(p, func(n int) string { return "$" + strconv.Itoa(n) }, listStatusHint)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return store.TaskListResult{}, s.translate("list tasks", err)
	}
	tasks, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (rota.Task, error) {
		t, err := scanTask(row)
		if err != nil {
			return rota.Task{}, err
		}
		return t.Task, nil
	})
	if err != nil {
		return store.TaskListResult{}, s.translate("list tasks", err)
	}
	return p.Page(tasks, limit), nil
}

// TaskUpdate implements store.Store.
func (s *Store) TaskUpdate(ctx context.Context, p store.TaskUpdateParams) (*rota.Task, error) {
	var out *rota.Task
	err := s.tx(ctx, "update task", func(t *txn) error {
		row, err := lockTask(ctx, t, p.ID)
		if err != nil {
			return err
		}
		stopDisallowed, err := p.ApplyTo(&row.TaskRow)
		if err != nil {
			return err
		}
		if stopDisallowed {
			// Runs of workers no longer allowed are asked to stop.
			t.queue(`UPDATE run_log SET stop_requested = true WHERE task_id = $1 AND status = 'RUNNING'
				AND NOT (worker_id = ANY ($2))`, row.ID, row.WorkerIDs)
		}
		now := ms(p.Now)
		t.queue(`UPDATE tasks SET level = $1, max_retries = $2, hb_timeout_s = $3, worker_ids = $4,
			updated_at = $5, run_stop = run_stop OR ($7 AND run_status = 'RUNNING' AND NOT (run_worker = ANY ($4)))
			WHERE id = $6`, row.Priority.Level(), row.MaxRetries, row.HeartbeatTimeoutSeconds,
			idList(row.WorkerIDs), now, row.ID, stopDisallowed)
		if row.Avail && !row.StopRequested {
			t.notify(row.Kind, ms(row.RunAt), now)
		}
		queueTaskWithRuns(t, p.ID, &out)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TaskStop implements store.Store.
func (s *Store) TaskStop(ctx context.Context, p store.TaskStopParams) (*rota.Task, error) {
	var out *rota.Task
	err := s.tx(ctx, "stop task", func(t *txn) error {
		row, err := lockTask(ctx, t, p.ID)
		if err != nil {
			return err
		}
		msg, err := p.MessageFor(&row.TaskRow)
		if err != nil {
			return err
		}
		now := ms(p.Now)
		if row.Running == 0 {
			t.queue(`UPDATE tasks SET status = 'CANCELED', avail = false, stop_requested = true,
				end_time = $1, message = $2, updated_at = $1 WHERE id = $3`, now, msg, row.ID)
		} else {
			t.queue(`UPDATE run_log SET stop_requested = true WHERE task_id = $1 AND status = 'RUNNING'`, row.ID)
			t.queue(`UPDATE tasks SET stop_requested = true, avail = false, message = $1, updated_at = $2,
				run_stop = run_stop OR run_status = 'RUNNING' WHERE id = $3`, msg, now, row.ID)
		}
		queueTaskWithRuns(t, p.ID, &out)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readyGroups are the (level, pinned) groups of tasks_ready under a kind:
// a query over a kind's waiting tasks in run_at order probes each.
const readyGroups = `(VALUES (0::smallint, false), (0::smallint, true), (1::smallint, false), (1::smallint, true),
	(2::smallint, false), (2::smallint, true)) AS g(level, pinned)`

// TaskNextRunAt implements store.Store: one index probe of tasks_ready
// per kind and (level, pinned) group.
func (s *Store) TaskNextRunAt(ctx context.Context, kinds []string, now time.Time) (time.Time, bool, error) {
	var next *int64
	err := s.pool.QueryRow(ctx, `SELECT min(n.run_at) FROM unnest($1::text[]) AS k(name) CROSS JOIN `+readyGroups+`,
		LATERAL (SELECT run_at FROM tasks WHERE avail AND kind = k.name AND level = g.level AND pinned = g.pinned
			AND run_at > $2 ORDER BY run_at LIMIT 1) AS n`,
		kinds, ms(now)).Scan(&next)
	if err != nil {
		return time.Time{}, false, s.translate("next run_at", err)
	}
	if next == nil {
		return time.Time{}, false, nil
	}
	return tm(*next), true, nil
}

// TaskCleanup implements store.Store: one statement deletes the oldest
// finished tasks of each kind with a retention (kinds by name, as
// sqlitestore), their runs going with them (ON DELETE CASCADE). Each kind
// is a range scan of tasks_done_end.
func (s *Store) TaskCleanup(ctx context.Context, p store.TaskCleanupParams) (int, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 1000
	}
	var deleted int
	err := s.tx(ctx, "clean up tasks", func(t *txn) error {
		deleted = 0
		if err := t.fence(ctx, p.Term, p.Now); err != nil {
			return err
		}
		t.queue(cleanupSQL, ms(p.Now), limit).Exec(func(ct pgconn.CommandTag) error {
			deleted = int(ct.RowsAffected())
			return nil
		})
		return nil
	})
	return deleted, err
}

// cleanupSQL deletes up to $2 finished tasks past their kind's retention
// at $1 (their runs go with them: ON DELETE CASCADE).
const cleanupSQL = `DELETE FROM tasks WHERE id IN (
			SELECT t.id FROM kinds k
			CROSS JOIN LATERAL (SELECT id, end_time FROM tasks
				WHERE done AND kind = k.name AND end_time < $1 - k.retention_seconds::bigint * 1000
				ORDER BY end_time, id LIMIT $2) AS t
			WHERE k.retention_seconds > 0
			ORDER BY k.name, t.end_time, t.id LIMIT $2)`
