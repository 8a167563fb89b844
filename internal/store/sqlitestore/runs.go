package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// runRow is a run as stored: in its task's row (inRow: the latest run of
// a single-worker task) or in run_log (history, multi-worker tasks, runs
// of a database older than the lean store).
type runRow struct {
	rota.Run
	kind  string
	inRow bool
}

// report is what a heartbeat or report reads: the run and its task, with
// the number of tasks that depend on it.
type report struct {
	run        *runRow
	task       *taskRow
	dependents int
}

// rowRunCols are the columns of the run a task row holds, after taskCols.
const rowRunCols = `run_id, run_worker, run_status, run_start, run_end, run_lease, run_deadline, run_stop, run_message, dependents`

// loadRun reads run id with its task: one statement for a run kept in its
// task's row (the task found by tasks_run), else the run of run_log and
// then its task.
func loadRun(ctx context.Context, tx *wtx, id string) (*report, error) {
	rep, err := scanRowRun(tx.QueryRowContext(ctx, `SELECT `+taskCols+`, `+rowRunCols+` FROM tasks WHERE run_id = ?`, id))
	if err == nil {
		return rep, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlitestore: get run %s: %w", id, err)
	}
	var kind string
	r, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runCols+`, kind FROM run_log WHERE id = ?`, id), &kind)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("run", id)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: get run %s: %w", id, err)
	}
	t, deps, _, err := getTaskLinked(ctx, tx, r.TaskID)
	if err != nil {
		return nil, err
	}
	return &report{run: &runRow{Run: *r, kind: kind}, task: t, dependents: deps}, nil
}

// scanRowRun reads a task row with the run it holds (taskCols, rowRunCols).
func scanRowRun(row scanner) (*report, error) {
	var (
		r                    runRow
		start, end, lease    int64
		deadline, dependents int64
	)
	t, err := scanTask(row, &r.ID, &r.WorkerID, &r.Status, &start, &end, &lease, &deadline, &r.StopRequested, &r.Message, &dependents)
	if err != nil {
		return nil, err
	}
	r.TaskID, r.WorkerAddress, r.Attempt, r.kind, r.inRow = t.ID, t.WorkerAddress, t.Attempt, t.Kind, true
	r.StartTime, r.EndTime, r.LeaseExpiresAt, r.Deadline = tm(start), tm(end), tm(lease), tm(deadline)
	return &report{run: &r, task: t, dependents: int(dependents)}, nil
}

type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// ownedRun loads a run for a report by workerID at now. It returns
// rota.ErrNotFound, or a lease-lost error, possibly after expiring the run
// on the spot (then wrapped in keepError so the expiry commits).
func ownedRun(ctx context.Context, tx *wtx, runID, workerID string, now int64, backoff func(int) time.Duration) (*report, error) {
	rep, err := loadRun(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	r := rep.run
	if r.WorkerID != workerID {
		return nil, store.LeaseLostError(runID, fmt.Sprintf("it belongs to worker %s", r.WorkerID))
	}
	if r.Status != rota.StatusRunning {
		return nil, store.LeaseLostError(runID, fmt.Sprintf("it already ended %s", r.Status))
	}
	if exp := store.RunExpiresAt(ms(r.LeaseExpiresAt), ms(r.Deadline)); exp <= now {
		why := "its lease expired"
		if err := expireRun(ctx, tx, rep, now, backoff); err != nil {
			return nil, err
		}
		if r.Deadline.UnixMilli() <= now && !r.Deadline.IsZero() {
			why = "its timeout passed"
		}
		return nil, keepError{&store.ExpiredError{Kind: r.kind, TaskID: r.TaskID, Err: store.LeaseLostError(runID, why)}}
	}
	return rep, nil
}

// RunHeartbeat implements store.Store.
func (s *Store) RunHeartbeat(ctx context.Context, p store.RunHeartbeatParams) (store.RunHeartbeatResult, error) {
	var res store.RunHeartbeatResult
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		now := ms(p.Now)
		rep, err := ownedRun(ctx, tx, p.RunID, p.WorkerID, now, nil)
		if err != nil {
			return err
		}
		r, hb := rep.run, rep.task.HeartbeatTimeoutSeconds
		var workerStop int
		lease := now + int64(hb)*1000
		msg := r.Message
		if p.Message != "" {
			msg = p.Message
		}
		if r.inRow {
			_, err = tx.ExecContext(ctx, `UPDATE tasks SET run_lease = ?, run_message = ? WHERE id = ?`, lease, msg, r.TaskID)
		} else {
			_, err = tx.ExecContext(ctx, `UPDATE run_log SET lease_expires_at = ?, expires_at = ?, message = ? WHERE id = ?`,
				lease, store.RunExpiresAt(lease, ms(r.Deadline)), msg, r.ID)
		}
		if err != nil {
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

// RunComplete implements store.Store. The task it returns is read in the
// writer's transaction, from the row the report just settled: a task
// whose only run is the one in its row needs no further statement. A
// success report queued with others is settled with them in one
// statement (completeRows); any other goes through completeInRow.
func (s *Store) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	var out *rota.Task
	o := &op{}
	if p.Success && !p.Release {
		o.report = &groupReport{p: p}
	}
	o.fn = func(ctx context.Context, tx *wtx) error {
		now := ms(p.Now)
		rep, err := o.report.take(tx)
		if !o.report.tried() {
			rep, err = completeInRow(ctx, tx, p, now)
		}
		if err != nil {
			return err
		}
		if rep == nil {
			if rep, err = ownedRun(ctx, tx, p.RunID, p.WorkerID, now, p.Backoff); err != nil {
				return err
			}
			status, run := store.ReportSettle(p, rep.run.StopRequested)
			if err := finishRun(ctx, tx, rep, status, p.Message, run); err != nil {
				return err
			}
		} else if err := settleDependents(ctx, tx, rep); err != nil {
			return err
		}
		out, err = reportedTask(ctx, tx, rep)
		return err
	}
	if err := s.writeOp(ctx, o); err != nil {
		return nil, err
	}
	return out, nil
}

// completeCols are the values completeSet takes for each report
// (completeArgs): which run, its worker, the report's instant, message
// and result.
const completeCols = `r_run, r_worker, r_now, r_msg, r_result`

// completeWidth is the number of completeCols.
const completeWidth = 5

// completeSet is completeInRow's UPDATE for many reports at once: the
// values of each report are bound as a row of VALUES (completeCols).
// Bound rows cost far less than a JSON array, which SQLite parsed again
// for each value it extracted (->>): a third of the statement's CPU. The
// statement has rows rows (completeSetQuery): a group of fewer reports
// pads with rows of NULLs, which match no task.
//
// What a success settles on the rows it matches (single-worker, no other
// run) is the same for every report but its instant, message and result
// (store.Settle: SUCCESS, done, one success, ended at the report's
// instant with its message): literals, checked against store.Settle for
// each report by settlesAsLiterals. Binding them too cost the writer a
// call into SQLite per value, and another for its name.
//
// INDEXED BY tasks_run: SQLite knows how many rows VALUES has, and from
// about a hundred of them (no ANALYZE statistics to tell it better) it
// planned an automatic index on tasks, built by reading the whole table
// at every group commit — half of all CPU end to end once tasks pile up.
// One probe of tasks_run per report is what the statement needs.
func completeSet(rows int) string {
	row := "(" + inList(completeWidth) + ")"
	return `WITH j(` + completeCols + `) AS (VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ") + `)
	UPDATE OR FAIL tasks INDEXED BY tasks_run SET status = 'SUCCESS', done = 1, avail = 0, successes = 1,
		running = 0, end_time = j.r_now, message = j.r_msg, result = coalesce(j.r_result, result), updated_at = j.r_now,
		run_status = 'SUCCESS', run_end = j.r_now, run_lease = 0, run_message = j.r_msg
	FROM j
	WHERE tasks.run_id = j.r_run AND run_worker = j.r_worker AND run_status = 'RUNNING' AND run_stop = 0 AND workers = 1
		AND running = 1 AND successes = 0 AND done = 0 AND stop_requested = 0
		AND run_lease > j.r_now AND (run_deadline = 0 OR run_deadline > j.r_now)
	RETURNING ` + settledCols
}

// settlesAsLiterals reports whether store.Settle settles success report
// p (on a single-worker task with no other run) as completeSet's literals
// do; a report it does not is settled alone, by completeInRow.
func settlesAsLiterals(p store.RunCompleteParams) bool {
	status, st := settleSuccess(p)
	return status == rota.StatusSuccess && st.Status == rota.StatusSuccess && st.Done && !st.Avail && st.Successes == 1 &&
		ms(st.EndTime) == ms(p.Now) && st.Message == p.Message && string(st.Result) == string(p.Result)
}

// maxGroupReports bounds the reports completeRows settles in one
// statement (the writer's default MaxBatch).
const maxGroupReports = 256

// completeSetRows are the row counts completeSet is prepared with: the
// powers of two up to completeSetStep, then its multiples up to
// maxGroupReports. A group pads to the next count; with powers of two
// only, a group of 65 reports bound and joined 63 rows of padding.
var completeSetRows = func() []int {
	var out []int
	for n := 2; n < completeSetStep; n *= 2 {
		out = append(out, n)
	}
	for n := completeSetStep; n <= maxGroupReports; n += completeSetStep {
		out = append(out, n)
	}
	return out
}()

// completeSetStep is the step of completeSetRows above its powers of two.
const completeSetStep = 32

// completeSetQueries[i] is completeSet(completeSetRows[i]): one statement
// text (and prepared statement) per row count.
var completeSetQueries = func() []string {
	var qs []string
	for _, n := range completeSetRows {
		qs = append(qs, completeSet(n))
	}
	return qs
}()

// completeSetQuery returns the completeSet statement for n reports
// (2 <= n <= maxGroupReports) and its number of rows.
func completeSetQuery(n int) (string, int) {
	i := 0
	for completeSetRows[i] < n {
		i++
	}
	return completeSetQueries[i], completeSetRows[i]
}

// groupReport is a success report that the writer may settle together
// with the others of its group commit (completeRows).
type groupReport struct {
	p   store.RunCompleteParams
	set bool    // completeRows ran for it in this transaction
	rep *report // what it settled (nil: the report did not match)
}

// tried reports whether completeRows already tried the report in this
// transaction (nil: it is not a grouped report).
func (g *groupReport) tried() bool { return g != nil && g.set }

// take returns what completeRows settled for the report and forgets it,
// so that a group run again (with savepoints) runs the report alone. A
// settled report marks the operation dirty: it wrote.
func (g *groupReport) take(tx *wtx) (*report, error) {
	if g == nil || !g.set {
		return nil, nil
	}
	rep := g.rep
	g.rep = nil
	if rep != nil {
		tx.dirty = true
	}
	return rep, nil
}

// completeArgs appends the values of a report in completeSet (a row of
// completeCols).
func completeArgs(args []any, p store.RunCompleteParams) []any {
	var result any
	if len(p.Result) > 0 {
		result = string(p.Result)
	}
	return append(args, p.RunID, p.WorkerID, ms(p.Now), p.Message, result)
}

// completeRows settles the success reports of reps in one UPDATE (they
// name distinct runs): what each settled is kept for its operation,
// which then only reads. A report the UPDATE did not match (any other
// state than completeInRow's) takes the general path in its operation.
// More reports than one statement takes are settled in several.
func completeRows(ctx context.Context, tx *wtx, reps []*groupReport) error {
	for len(reps) > 0 {
		n := min(len(reps), maxGroupReports)
		if err := completeChunk(ctx, tx, reps[:n]); err != nil {
			return err
		}
		reps = reps[n:]
	}
	return nil
}

// completeChunk is completeRows for 2 to maxGroupReports reports (a
// lone one, the last of a bigger group, settles through completeInRow).
func completeChunk(ctx context.Context, tx *wtx, reps []*groupReport) error {
	reps = slices.DeleteFunc(slices.Clone(reps), func(g *groupReport) bool { return !settlesAsLiterals(g.p) })
	if len(reps) <= 1 {
		return nil // left unset: their operations run them alone
	}
	q, rows := completeSetQuery(len(reps))
	args := make([]any, 0, rows*completeWidth)
	byRun := make(map[string]*groupReport, len(reps))
	for _, g := range reps {
		args = completeArgs(args, g.p)
		g.set, g.rep = true, nil
		byRun[g.p.RunID] = g
	}
	for len(args) < cap(args) {
		args = append(args, nil) // padding rows: no run matches NULL
	}
	res, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("sqlitestore: complete runs: %w", err)
	}
	defer res.Close()
	scans := make([]settledScan, len(reps)) // a row per report at most
	var read []any
	for n := 0; res.Next(); n++ {
		if n == len(scans) {
			return fmt.Errorf("sqlitestore: complete runs: more rows than reports")
		}
		sc := &scans[n]
		if read, err = sc.scan(res, read); err != nil {
			return fmt.Errorf("sqlitestore: complete runs: %w", err)
		}
		if g := byRun[sc.runID]; g != nil {
			if g.rep, err = sc.settle(g.p); err != nil {
				return fmt.Errorf("sqlitestore: complete runs: %w", err)
			}
		}
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("sqlitestore: complete runs: %w", err)
	}
	return nil
}

// completeInRow settles, in one UPDATE … RETURNING, the common report: a
// success on a run kept in its task's row, the task single-worker, neither
// it nor the run asked to stop, the lease and deadline ahead (the WHERE
// clause checks that state, so that the outcome is store.Settle's for it,
// computed here). It returns the settled row, or nil when the report is
// not of that kind: the caller then takes the general path, which also
// explains a refusal.
func completeInRow(ctx context.Context, tx *wtx, p store.RunCompleteParams, now int64) (*report, error) {
	if !p.Success || p.Release {
		return nil, nil
	}
	status, run := store.ReportSettle(p, false)
	st := store.Settle(store.SettleTask{Workers: 1}, run) // successes 0, no other run
	var result any
	if len(st.Result) > 0 {
		result = string(st.Result)
	}
	// Failures and run_at are kept: a success changes neither. OR FAIL:
	// see noStatementJournal.
	rep, err := scanRowRun(tx.QueryRowContext(ctx, `UPDATE OR FAIL tasks SET status = ?1, done = ?2, avail = ?3, successes = ?4,
		running = 0, end_time = ?5, message = ?6, result = coalesce(?7, result), updated_at = ?8,
		run_status = ?9, run_end = ?8, run_lease = 0, run_message = ?10
		WHERE run_id = ?11 AND run_worker = ?12 AND run_status = 'RUNNING' AND run_stop = 0 AND workers = 1
			AND running = 1 AND successes = 0 AND done = 0 AND stop_requested = 0
			AND run_lease > ?8 AND (run_deadline = 0 OR run_deadline > ?8)
		RETURNING `+taskCols+`, `+rowRunCols,
		string(st.Status), boolInt(st.Done), boolInt(st.Avail), st.Successes, ms(st.EndTime), st.Message, result, now,
		string(status), p.Message, p.RunID, p.WorkerID))
	if errors.Is(err, sql.ErrNoRows) {
		tx.dirty = false // nothing matched: nothing written
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: complete run %s: %w", p.RunID, err)
	}
	return rep, nil
}

// settleDependents lets the dependency triggers settle the dependents of
// a task that just ended (dep_status), if it has any.
func settleDependents(ctx context.Context, tx *wtx, rep *report) error {
	if !rep.task.Done || rep.dependents == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET dep_status = status WHERE id = ?`, rep.task.ID); err != nil {
		return fmt.Errorf("sqlitestore: settle dependents of %s: %w", rep.task.ID, err)
	}
	return nil
}

// reportedTask is the task of a report after it settled, with its runs
// and, once it ended, its dependents: the report's own task, not a copy
// (rep is the operation's alone, read just for this answer).
func reportedTask(ctx context.Context, tx *wtx, rep *report) (*rota.Task, error) {
	t := &rep.task.Task
	if rep.run.inRow && t.Workers == 1 && t.Attempt <= 1 {
		t.Runs = []rota.Run{rep.run.Run}
	} else {
		runs, err := taskRuns(ctx, tx, t.ID)
		if err != nil {
			return nil, err
		}
		t.Runs = runs
	}
	if rep.task.Done && rep.dependents > 0 {
		var err error
		if _, t.Dependents, err = taskLinks(ctx, tx, t.ID, false); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// finishRun ends a RUNNING run with status and msg, and moves its task
// after the outcome run: one UPDATE of the task row for a run kept in
// it; for a run of run_log, that run's UPDATE too.
func finishRun(ctx context.Context, tx *wtx, rep *report, status rota.Status, msg string, run store.SettleRun) error {
	r, t := rep.run, rep.task
	now := ms(run.Now)
	r.Status, r.EndTime, r.Message, r.LeaseExpiresAt = status, tm(now), msg, time.Time{}
	if !r.inRow {
		if _, err := tx.ExecContext(ctx, `UPDATE run_log SET status = ?, end_time = ?, expires_at = 0, lease_expires_at = 0, message = ? WHERE id = ?`,
			string(status), now, msg, r.ID); err != nil {
			return fmt.Errorf("sqlitestore: end run %s: %w", r.ID, err)
		}
	}
	// The row's run columns keep their value unless the run is the row's.
	rowRun := `run_status = CASE WHEN ?1 THEN ?2 ELSE run_status END, run_end = CASE WHEN ?1 THEN ?3 ELSE run_end END,
		run_lease = CASE WHEN ?1 THEN 0 ELSE run_lease END, run_message = CASE WHEN ?1 THEN ?4 ELSE run_message END`
	args := []any{r.inRow, string(status), now, msg}
	t.Running = max(t.Running-1, 0)
	if t.Done {
		// A straggler of a task that already ended: only the counter moves.
		_, err := tx.ExecContext(ctx, `UPDATE tasks SET `+rowRun+`, running = ?5, updated_at = ?3 WHERE id = ?6`,
			append(args, t.Running, t.ID)...)
		return wrapErr("settle task", err)
	}
	st := t.Settle(run)
	var resultVal any
	if len(st.Result) > 0 {
		resultVal = string(st.Result)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tasks SET `+rowRun+`, status = ?5, done = ?6, avail = ?7, failures = ?8,
		successes = ?9, running = ?10, run_at = ?11, end_time = ?12, message = ?13, result = ?14, updated_at = ?3 WHERE id = ?15`,
		append(args, string(st.Status), boolInt(st.Done), boolInt(st.Avail), st.Failures, st.Successes, t.Running,
			ms(st.RunAt), ms(st.EndTime), st.Message, resultVal, t.ID)...); err != nil {
		return fmt.Errorf("sqlitestore: settle task %s: %w", t.ID, err)
	}
	if err := settleDependents(ctx, tx, rep); err != nil {
		return err
	}
	if st.StopOthers {
		// Other running runs are those of a multi-worker task: in run_log.
		if _, err := tx.ExecContext(ctx, `UPDATE run_log SET stop_requested = 1 WHERE task_id = ? AND status = 'RUNNING'`, t.ID); err != nil {
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
func expireRun(ctx context.Context, tx *wtx, rep *report, now int64, backoff func(int) time.Duration) error {
	msg, run := store.ExpirySettle(rep.run.Deadline, tm(now), rep.run.StopRequested, backoff)
	return finishRun(ctx, tx, rep, rota.StatusTimeout, msg, run)
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
		ids, err := collectRows(rows, "run id", func(sc scanner) (*string, error) {
			var id string
			return &id, sc.Scan(&id)
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			rep, err := loadRun(ctx, tx, id)
			if err != nil {
				return err
			}
			if err := expireRun(ctx, tx, rep, now, p.Backoff); err != nil {
				return err
			}
			res.Add(rep.run.TaskID, rep.run.kind)
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
