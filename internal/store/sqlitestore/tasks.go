package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// ms and tm are the package's short names for store.Millis and
// store.FromMillis: instants as stored.
func ms(t time.Time) int64 { return store.Millis(t) }

func tm(v int64) time.Time { return store.FromMillis(v) }

// queryer is what both *sql.DB and *sql.Tx offer.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

const taskCols = store.TaskColumns

// taskRow is a task as stored, with the bookkeeping the domain type hides.
type taskRow = store.TaskRow

type scanner interface{ Scan(dest ...any) error }

// collectRows reads every row of rows with scan (what names the rows in an
// error) and closes rows.
func collectRows[T any](rows *sql.Rows, what string, scan func(scanner) (*T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: scan %s: %w", what, err)
		}
		out = append(out, *v)
	}
	return out, rows.Err()
}

// scanTask reads the taskCols of a row, then extra; worker_ids is JSON
// text.
func scanTask(sc scanner, extra ...any) (*taskRow, error) {
	var (
		ts        store.TaskScan
		workerIDs sql.NullString
	)
	if err := sc.Scan(ts.Dest(&workerIDs, extra...)...); err != nil {
		return nil, err
	}
	r := ts.Row(nil)
	if workerIDs.Valid {
		if err := json.Unmarshal([]byte(workerIDs.String), &r.WorkerIDs); err != nil {
			return nil, fmt.Errorf("task %s: decode worker_ids: %w", r.ID, err)
		}
	}
	return &r, nil
}

func getTask(ctx context.Context, q queryer, id string) (*taskRow, error) {
	t, _, _, err := getTaskLinked(ctx, q, id)
	return t, err
}

// getTaskLinked reads task id with the number of tasks that depend on it
// (dependents) and that it depends on (parents): the links are read only
// when there are some.
func getTaskLinked(ctx context.Context, q queryer, id string) (t *taskRow, dependents, parents int, err error) {
	t, err = scanTask(q.QueryRowContext(ctx, `SELECT `+taskCols+`, dependents, parents FROM tasks WHERE id = ?`, id),
		&dependents, &parents)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, 0, notFound("task", id)
	}
	if err != nil {
		return nil, 0, 0, fmt.Errorf("sqlitestore: get task %s: %w", id, err)
	}
	return t, dependents, parents, nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func workerIDsValue(ids []string) any {
	if len(ids) == 0 {
		return nil
	}
	b, _ := json.Marshal(ids)
	return string(b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TaskInsert implements store.Store.
func (s *Store) TaskInsert(ctx context.Context, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	return store.InsertOne(ctx, p, s.TaskInsertMany)
}

// TaskInsertMany implements store.Store. Runs of plain items (no key,
// no dependencies) are inserted by multi-row INSERTs; a keyed item or one
// with dependencies, which must see the items before it, goes alone.
func (s *Store) TaskInsertMany(ctx context.Context, ps []store.TaskInsertParams) ([]store.TaskInsertResult, error) {
	out := make([]store.TaskInsertResult, len(ps))
	o := &op{}
	if plainInserts(ps) {
		o.insert = &groupInsert{ps: ps, out: out}
	}
	o.fn = func(ctx context.Context, tx *wtx) error {
		if o.insert.take(tx) {
			return nil
		}
		start := 0 // the first item of the current run of plain items
		for i, p := range ps {
			deps := len(p.DependsOn) > 0 || len(p.DependsOnItems) > 0
			if p.Key == "" && !deps {
				continue
			}
			if err := insertPlain(ctx, tx, ps[start:i], out[start:i]); err != nil {
				return err
			}
			start = i + 1
			r, err := insertTask(ctx, tx, p)
			if err != nil {
				return err
			}
			if !r.Existing && deps {
				if r, err = insertDeps(ctx, tx, p, r, i, out[:i]); err != nil {
					return err
				}
			}
			out[i] = r
		}
		return insertPlain(ctx, tx, ps[start:], out[start:])
	}
	if err := s.writeOp(ctx, o); err != nil {
		return nil, err
	}
	return out, nil
}

// plainInserts reports whether every item of ps is plain: no key, no
// dependencies (such items are inserted by multi-row INSERTs).
func plainInserts(ps []store.TaskInsertParams) bool {
	for _, p := range ps {
		if p.Key != "" || len(p.DependsOn) > 0 || len(p.DependsOnItems) > 0 {
			return false
		}
	}
	return len(ps) > 0
}

// groupInsert is an insert of plain tasks that the writer may insert
// together with the others of its group commit (insertGroup), so that
// single submits queued together share multi-row INSERTs.
type groupInsert struct {
	ps  []store.TaskInsertParams
	out []store.TaskInsertResult
	set bool // insertGroup inserted its tasks in this transaction
}

// take reports whether insertGroup already inserted the tasks in this
// transaction, and forgets it, so that a group run again (with
// savepoints) runs the insert alone. An inserted group marks the
// operation dirty: it wrote.
func (g *groupInsert) take(tx *wtx) bool {
	if g == nil || !g.set {
		return false
	}
	g.set = false
	tx.dirty = true
	return true
}

// groupInserts returns the grouped inserts at the start of ops, up to the
// first other operation; none when the first is already inserted, or
// with savepoints (a group run again runs each operation alone).
func groupInserts(ops []*op, savepoints bool) []*groupInsert {
	if savepoints || len(ops) == 0 || ops[0].insert == nil || ops[0].insert.set {
		return nil
	}
	var out []*groupInsert
	for _, o := range ops {
		if o.insert == nil {
			break
		}
		out = append(out, o.insert)
	}
	return out
}

// insertGroup inserts the tasks of the inserts ins with as few multi-row
// INSERTs as their rows need (insertPlain), and records each insert's
// results. On an error (a duplicate id) nothing is settled: the caller
// rolls back and runs each operation alone.
func insertGroup(ctx context.Context, tx *wtx, ins []*groupInsert) error {
	var ps []store.TaskInsertParams
	for _, g := range ins {
		ps = append(ps, g.ps...)
	}
	out := make([]store.TaskInsertResult, len(ps))
	if err := insertPlain(ctx, tx, ps, out); err != nil {
		return err
	}
	for _, g := range ins {
		n := copy(g.out, out)
		out = out[n:]
		g.set = true
	}
	return nil
}

// maxInsertRows bounds the rows of one multi-row INSERT: at most this many
// statement texts (one per row count), each prepared once.
const maxInsertRows = 32

// insertQueries[n] is the INSERT of n tasks' rows (n ≥ 1); OR FAIL: see
// noStatementJournal.
var insertQueries = func() []string {
	qs := make([]string, maxInsertRows+1)
	row := `(?, ?, ?, ?, ?, 'SCHEDULED', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for n := 1; n <= maxInsertRows; n++ {
		qs[n] = `INSERT OR FAIL INTO tasks (id, kind, level, payload, key, status, max_retries, workers, worker_ids, pinned,
			timeout_s, hb_timeout_s, created_at, run_at, schedule_id, fire_time, updated_at) VALUES ` +
			strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
	}
	return qs
}()

// insertPlain inserts new tasks (out: their results), up to
// maxInsertRows a statement.
func insertPlain(ctx context.Context, tx *wtx, ps []store.TaskInsertParams, out []store.TaskInsertResult) error {
	for _, p := range ps {
		if err := ensureKind(ctx, tx, p.Kind); err != nil {
			return err
		}
	}
	for len(ps) > 0 {
		n := min(len(ps), maxInsertRows)
		args := make([]any, 0, n*16)
		for i, p := range ps[:n] {
			var t *rota.Task
			args, t = insertArgs(args, p)
			out[i] = store.TaskInsertResult{Task: t}
		}
		if _, err := tx.ExecContext(ctx, insertQueries[n], args...); err != nil {
			return fmt.Errorf("sqlitestore: insert tasks: %w", err)
		}
		ps, out = ps[n:], out[n:]
	}
	return nil
}

// insertArgs appends the parameters of a row of insertQueries for p and
// returns the task the row stores.
func insertArgs(args []any, p store.TaskInsertParams) ([]any, *rota.Task) {
	now := ms(p.Now)
	runAt := ms(p.RunAt)
	if runAt == 0 {
		runAt = now
	}
	args = append(args, p.ID, p.Kind, p.Priority.Level(), string(p.Payload), nullString(p.Key), p.MaxRetries, p.Workers,
		workerIDsValue(p.WorkerIDs), boolInt(len(p.WorkerIDs) > 0), p.TimeoutSeconds, p.HeartbeatTimeoutSeconds,
		now, runAt, p.ScheduleID, ms(p.FireTime), now)
	return args, &rota.Task{
		ID: p.ID, Kind: p.Kind, Priority: p.Priority, Payload: p.Payload, Key: p.Key,
		Status: rota.StatusScheduled, MaxRetries: p.MaxRetries, Workers: p.Workers, WorkerIDs: p.WorkerIDs,
		TimeoutSeconds: p.TimeoutSeconds, HeartbeatTimeoutSeconds: p.HeartbeatTimeoutSeconds,
		CreatedAt: tm(now), RunAt: tm(runAt), ScheduleID: p.ScheduleID, FireTime: tm(ms(p.FireTime)),
	}
}

// insertTask inserts one task, answering a keyed insert with the task that
// holds its key (run again with RerunIfFinished) if there is one.
func insertTask(ctx context.Context, tx *wtx, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	if p.Key != "" {
		t, err := scanTask(tx.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE kind = ? AND key = ? AND key_held = 1`, p.Kind, p.Key))
		switch {
		case err == nil && t.Done && p.RerunIfFinished:
			return rerunTask(ctx, tx, t, p)
		case err == nil:
			return store.TaskInsertResult{Task: &t.Task, Existing: true}, nil
		case !errors.Is(err, sql.ErrNoRows):
			return store.TaskInsertResult{}, fmt.Errorf("sqlitestore: look up key: %w", err)
		}
	}
	out := make([]store.TaskInsertResult, 1)
	err := insertPlain(ctx, tx, []store.TaskInsertParams{p}, out)
	return out[0], err
}

// insertDeps records the dependencies of the task r just inserted for
// item i of an insert (prior: the results of the earlier items) and
// starts it WAITING, or CANCELED when one has already failed.
func insertDeps(ctx context.Context, tx *wtx, p store.TaskInsertParams, r store.TaskInsertResult, i int,
	prior []store.TaskInsertResult) (store.TaskInsertResult, error) {
	ids, err := store.DepIDs(p, i, prior)
	if err != nil {
		return r, err
	}
	args := make([]any, len(ids))
	for j, id := range ids {
		args[j] = id
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, status FROM tasks WHERE id IN (`+inList(len(ids))+`)`, args...)
	if err != nil {
		return r, fmt.Errorf("sqlitestore: read dependencies: %w", err)
	}
	status := make(map[string]rota.Status, len(ids))
	for rows.Next() {
		var (
			id string
			s  rota.Status
		)
		if err := rows.Scan(&id, &s); err != nil {
			rows.Close()
			return r, fmt.Errorf("sqlitestore: read dependencies: %w", err)
		}
		status[id] = s
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("sqlitestore: read dependencies: %w", err)
	}
	st, err := store.StartWithDeps(i, ids, status)
	if err != nil {
		return r, err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `INSERT INTO task_deps (task_id, dep_id) VALUES (?, ?)`, r.Task.ID, id); err != nil {
			return r, fmt.Errorf("sqlitestore: insert dependency: %w", err)
		}
	}
	// The parents count their dependents: their dependency triggers and
	// link reads run only while they have some.
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET dependents = dependents + 1 WHERE id IN (`+inList(len(ids))+`)`,
		args...); err != nil {
		return r, fmt.Errorf("sqlitestore: count dependents: %w", err)
	}
	now := ms(p.Now)
	switch {
	case st.Failed != "":
		_, err = tx.ExecContext(ctx, `UPDATE tasks SET status = 'CANCELED', done = 1, avail = 0, end_time = ?, message = ?,
			parents = ?, updated_at = ? WHERE id = ?`, now, st.Failed, len(ids), now, r.Task.ID)
	case st.Waiting > 0:
		_, err = tx.ExecContext(ctx, `UPDATE tasks SET status = 'WAITING', avail = 0, deps_waiting = ?, parents = ?, updated_at = ? WHERE id = ?`,
			st.Waiting, len(ids), now, r.Task.ID)
	default:
		_, err = tx.ExecContext(ctx, `UPDATE tasks SET parents = ? WHERE id = ?`, len(ids), r.Task.ID)
	}
	if err != nil {
		return r, fmt.Errorf("sqlitestore: start task %s after its dependencies: %w", r.Task.ID, err)
	}
	t, err := getTask(ctx, tx, r.Task.ID)
	if err != nil {
		return r, err
	}
	t.DependsOn = ids
	r.Task = &t.Task
	return r, nil
}

// taskLinks reads the dependents (children) of task id and, with
// withParents, its dependencies (parents), by id.
func taskLinks(ctx context.Context, q queryer, id string, withParents bool) (parents, children []string, err error) {
	links := []struct {
		sql string
		out *[]string
	}{
		{`SELECT task_id FROM task_deps WHERE dep_id = ? ORDER BY task_id`, &children},
		{`SELECT dep_id FROM task_deps WHERE task_id = ? ORDER BY dep_id`, &parents},
	}
	if !withParents {
		links = links[:1]
	}
	for _, l := range links {
		rows, err := q.QueryContext(ctx, l.sql, id)
		if err != nil {
			return nil, nil, fmt.Errorf("sqlitestore: links of %s: %w", id, err)
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return nil, nil, fmt.Errorf("sqlitestore: links of %s: %w", id, err)
			}
			*l.out = append(*l.out, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("sqlitestore: links of %s: %w", id, err)
		}
	}
	return parents, children, nil
}

// rerunTask makes the finished task t claimable again under its id for
// insert p (RerunIfFinished): its runs are deleted and it starts afresh.
func rerunTask(ctx context.Context, tx *wtx, t *taskRow, p store.TaskInsertParams) (store.TaskInsertResult, error) {
	now := ms(p.Now)
	runAt := ms(p.RunAt)
	if runAt == 0 {
		runAt = now
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM run_log WHERE task_id = ?`, t.ID); err != nil {
		return store.TaskInsertResult{}, fmt.Errorf("sqlitestore: rerun %s: clear runs: %w", t.ID, err)
	}
	_, err := tx.ExecContext(ctx, `UPDATE tasks SET status = 'SCHEDULED', done = 0, avail = 1, held = 0, deps_waiting = 0, attempt = 0,
		failures = 0, successes = 0, running = 0, stop_requested = 0, run_at = ?, start_time = 0, end_time = 0,
		worker_address = '', message = '', result = NULL, skip_reason = '', updated_at = ?, dep_status = '',
		run_id = NULL, run_worker = '', run_status = '', run_start = 0, run_end = 0, run_lease = 0, run_deadline = 0,
		run_stop = 0, run_message = '' WHERE id = ?`, runAt, now, t.ID)
	if err != nil {
		return store.TaskInsertResult{}, fmt.Errorf("sqlitestore: rerun %s: %w", t.ID, err)
	}
	r, err := getTask(ctx, tx, t.ID)
	if err != nil {
		return store.TaskInsertResult{}, err
	}
	return store.TaskInsertResult{Task: &r.Task, Existing: true, Rerun: true}, nil
}

// ensureKind creates kind with default settings if it does not exist.
// Kinds are never deleted, so once seen to exist (a no-op insert) a kind is
// remembered and later inserts skip the statement; a kind created by this
// transaction is not remembered, as the transaction may still roll back.
func ensureKind(ctx context.Context, tx *wtx, kind string) error {
	if _, ok := tx.kinds.Load(kind); ok {
		return nil
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO kinds (name) VALUES (?) ON CONFLICT (name) DO NOTHING`, kind)
	if err != nil {
		return fmt.Errorf("sqlitestore: create kind %s: %w", kind, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		tx.kinds.Store(kind, struct{}{})
	}
	return nil
}

// TaskGet implements store.Store: the task, its runs (history and the
// run in its row) and its links, read only when it has some.
func (s *Store) TaskGet(ctx context.Context, id string) (*rota.Task, error) {
	t, dependents, parents, err := getTaskLinked(ctx, s.r, id)
	if err != nil {
		return nil, err
	}
	if t.Runs, err = taskRuns(ctx, s.r, id); err != nil {
		return nil, err
	}
	if dependents > 0 || parents > 0 {
		if t.DependsOn, t.Dependents, err = taskLinks(ctx, s.r, id, true); err != nil {
			return nil, err
		}
	}
	return &t.Task, nil
}

const runCols = store.RunColumns

// scanRun reads the runCols of a row, plus extra destinations after them.
func scanRun(sc scanner, extra ...any) (*rota.Run, error) {
	var rs store.RunScan
	if err := sc.Scan(rs.Dest(extra...)...); err != nil {
		return nil, err
	}
	r := rs.Run()
	return &r, nil
}

func taskRuns(ctx context.Context, q queryer, taskID string) ([]rota.Run, error) {
	rows, err := q.QueryContext(ctx, `SELECT `+runCols+` FROM runs WHERE task_id = ? ORDER BY id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: runs of %s: %w", taskID, err)
	}
	return collectRows(rows, "run", func(sc scanner) (*rota.Run, error) { return scanRun(sc) })
}

// TaskList implements store.Store.
func (s *Store) TaskList(ctx context.Context, p store.TaskListParams) (store.TaskListResult, error) {
	parts, err := s.listParts(ctx, p)
	if err != nil {
		return store.TaskListResult{}, err
	}
	if len(parts) > 1 {
		return s.taskListByParts(ctx, p, parts)
	}
	tasks, limit, err := s.taskListRows(ctx, parts[0])
	if err != nil {
		return store.TaskListResult{}, err
	}
	return p.Page(tasks, limit), nil
}

// taskListRows reads the rows of part's page (listQuery: up to limit+1
// tasks, in list order) and its page size.
func (s *Store) taskListRows(ctx context.Context, part listPart) ([]rota.Task, int, error) {
	q, args, limit, err := listQuery(part)
	if err != nil {
		return nil, 0, err
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlitestore: list tasks: %w", err)
	}
	defer rows.Close()
	var tasks []rota.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("sqlitestore: scan task: %w", err)
		}
		tasks = append(tasks, t.Task)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlitestore: list tasks: %w", err)
	}
	return tasks, limit, nil
}

// TaskUpdate implements store.Store.
func (s *Store) TaskUpdate(ctx context.Context, p store.TaskUpdateParams) (*rota.Task, error) {
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		t, err := getTask(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		stopDisallowed, err := p.ApplyTo(t)
		if err != nil {
			return err
		}
		if stopDisallowed {
			// Runs of workers no longer allowed are asked to stop.
			args := []any{t.ID}
			for _, w := range t.WorkerIDs {
				args = append(args, w)
			}
			for _, q := range []string{`UPDATE run_log SET stop_requested = 1 WHERE task_id = ? AND status = 'RUNNING'
				AND worker_id NOT IN (` + inList(len(t.WorkerIDs)) + `)`, `UPDATE tasks SET run_stop = 1 WHERE id = ?
				AND run_status = 'RUNNING' AND run_worker NOT IN (` + inList(len(t.WorkerIDs)) + `)`} {
				if _, err := tx.ExecContext(ctx, q, args...); err != nil {
					return fmt.Errorf("sqlitestore: stop disallowed runs: %w", err)
				}
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE tasks SET level = ?, max_retries = ?, hb_timeout_s = ?, worker_ids = ?,
			pinned = ?, updated_at = ? WHERE id = ?`, t.Priority.Level(), t.MaxRetries, t.HeartbeatTimeoutSeconds,
			workerIDsValue(t.WorkerIDs), boolInt(len(t.WorkerIDs) > 0), ms(p.Now), t.ID)
		if err != nil {
			return fmt.Errorf("sqlitestore: update task %s: %w", t.ID, err)
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
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		t, err := getTask(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		msg, err := p.MessageFor(t)
		if err != nil {
			return err
		}
		now := ms(p.Now)
		if t.Running == 0 {
			_, err = tx.ExecContext(ctx, `UPDATE tasks SET status = 'CANCELED', dep_status = 'CANCELED', done = 1, avail = 0, stop_requested = 1,
				end_time = ?, message = ?, updated_at = ? WHERE id = ?`, now, msg, now, t.ID)
		} else {
			if _, err = tx.ExecContext(ctx, `UPDATE run_log SET stop_requested = 1 WHERE task_id = ? AND status = 'RUNNING'`, t.ID); err != nil {
				return fmt.Errorf("sqlitestore: stop runs of %s: %w", t.ID, err)
			}
			_, err = tx.ExecContext(ctx, `UPDATE tasks SET stop_requested = 1, avail = 0, message = ?, updated_at = ?,
				run_stop = CASE WHEN run_status = 'RUNNING' THEN 1 ELSE run_stop END WHERE id = ?`, msg, now, t.ID)
		}
		if err != nil {
			return fmt.Errorf("sqlitestore: stop task %s: %w", t.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.TaskGet(ctx, p.ID)
}

// TaskNextRunAt implements store.Store.
func (s *Store) TaskNextRunAt(ctx context.Context, kinds []string, now time.Time) (time.Time, bool, error) {
	var best int64
	for _, k := range kinds {
		var v sql.NullInt64
		if err := s.r.QueryRowContext(ctx, nextRunAtQuery, k, ms(now)).Scan(&v); err != nil {
			return time.Time{}, false, fmt.Errorf("sqlitestore: next run_at: %w", err)
		}
		if v.Valid && (best == 0 || v.Int64 < best) {
			best = v.Int64
		}
	}
	if best == 0 {
		return time.Time{}, false, nil
	}
	return tm(best), true, nil
}

// minReadyQuery is the earliest run_at of the available tasks of kind ?1
// with cond (on run_at, against ?2): one probe of tasks_ready per level
// and pinned-or-not, each a seek to its first entry, rather than a scan of
// every waiting task of the kind.
func minReadyQuery(cond string) string {
	var probes []string
	for level := range 3 {
		for pinned := range 2 {
			probes = append(probes, fmt.Sprintf(`SELECT (SELECT MIN(run_at) FROM tasks WHERE avail = 1 AND kind = ?1
				AND level = %d AND pinned = %d AND %s) AS m`, level, pinned, cond))
		}
	}
	return `SELECT MIN(m) FROM (` + strings.Join(probes, " UNION ALL ") + `)`
}

// nextRunAtQuery is TaskNextRunAt's: the next due time after ?2.
var nextRunAtQuery = minReadyQuery("run_at > ?2")

// oldestWaitingQuery is Stats': the oldest ready time at or before ?2 of
// a waiting (SCHEDULED) task.
var oldestWaitingQuery = minReadyQuery("status = 'SCHEDULED' AND run_at <= ?2")
