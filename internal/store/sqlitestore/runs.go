package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/jsonwire"
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
// success report queued with others is settled with them (completeRows);
// any other goes through completeInRow.
func (s *Store) RunComplete(ctx context.Context, p store.RunCompleteParams) (*rota.Task, error) {
	var out *rota.Task
	o := &op{}
	if p.Success && !p.Release {
		o.report = &groupReport{p: p}
	}
	// The same operation as completeOp's, built here: through completeOp
	// (inlined), each call in a new goroutine grew its stack, 1,000
	// instructions a report more in BenchmarkGroupCycleHeld.
	o.fn = func(ctx context.Context, tx *wtx) (err error) {
		out, err = settleReport(ctx, tx, p, o.report)
		return err
	}
	if err := s.writeOp(ctx, o); err != nil {
		return nil, err
	}
	return out, nil
}

// RunCompleteMany settles reports that came together (a worker's batch),
// each as RunComplete does: tasks[i] and errs[i] answer ps[i], exactly one
// of them nil. Their operations are queued one after the other by the
// caller, so that they commit together (up to Config.MaxBatch a group)
// and their success reports are settled together; dispatch's
// CompleteMany otherwise ran a goroutine per report, each queuing its
// operation and waking to its answer. An operation once queued runs: the
// call waits for every queued one even if ctx ends, so that it never
// reports a failure for a report that committed.
func (s *Store) RunCompleteMany(ctx context.Context, ps []store.RunCompleteParams) ([]*rota.Task, []error) {
	tasks, errs := make([]*rota.Task, len(ps)), make([]error, len(ps))
	ops := make([]*op, len(ps))
	var wg sync.WaitGroup
	queued := 0
	for i, p := range ps {
		ops[i] = completeOp(p, &tasks[i])
		ops[i].wg = &wg
		wg.Add(1)
		err := s.queue(ctx, ops[i])
		if err == nil {
			queued++
			continue
		}
		wg.Done()
		for j := i; j < len(ps); j++ {
			errs[j] = err
		}
		break
	}
	wg.Wait()
	for i := range queued {
		if errs[i] = unavailable(ops[i].err); errs[i] != nil {
			tasks[i] = nil
		}
	}
	return tasks, errs
}

// completeOp returns the writer operation of report p (RunCompleteMany),
// which sets *out to the task it answers.
func completeOp(p store.RunCompleteParams, out **rota.Task) *op {
	o := &op{}
	if p.Success && !p.Release {
		o.report = &groupReport{p: p}
	}
	o.fn = func(ctx context.Context, tx *wtx) (err error) {
		*out, err = settleReport(ctx, tx, p, o.report)
		return err
	}
	return o
}

// settleReport settles report p in the writer's transaction and returns
// its task: what completeRows settled for it when it was grouped (g),
// else completeInRow's UPDATE for the common success, else the general
// path (ownedRun, finishRun).
func settleReport(ctx context.Context, tx *wtx, p store.RunCompleteParams, g *groupReport) (*rota.Task, error) {
	now := ms(p.Now)
	rep, err := g.take(tx)
	if !g.tried() {
		rep, err = completeInRow(ctx, tx, p, now)
	}
	if err != nil {
		return nil, err
	}
	if rep == nil {
		if rep, err = ownedRun(ctx, tx, p.RunID, p.WorkerID, now, p.Backoff); err != nil {
			return nil, err
		}
		status, run := store.ReportSettle(p, rep.run.StopRequested)
		if err := finishRun(ctx, tx, rep, status, p.Message, run); err != nil {
			return nil, err
		}
	} else if err := settleDependents(ctx, tx, rep); err != nil {
		return nil, err
	}
	return reportedTask(ctx, tx, rep)
}

// A group of success reports is settled in two statements (three when
// some carry a message or a result), whatever its size:
//
//   - completeFind reads the rows the reports settle: each report's run,
//     in its task's row, running for its worker, single-worker, not asked
//     to stop (the state completeInRow settles), with the task's columns
//     the report leaves as they are (settledCols). The runs and their
//     workers come as one JSON object, one parameter: SQLite's json_each
//     costs far less than a bound parameter per value, each a call
//     through database/sql and the driver and a copy into C memory. The
//     lease and deadline, whose bound is each report's own instant, are
//     checked in Go (settledScan.live).
//   - completeSettle writes them: one UPDATE … FROM json_each of their
//     task ids per instant the reports were made at (a worker's batch has
//     one or two), for the reports with neither message nor result
//     (nearly all); completeSettleRows, bound VALUES rows, for the others.
//
// Before, one UPDATE … RETURNING did both. SQLite runs RETURNING as a
// trigger, which makes it load every column of the old row into
// registers for every row (47), buffer the returned values in a
// temporary table and read them back: reading the rows first and
// updating them without RETURNING costs the writer 6% less per task
// (BenchmarkGroupCycleHeld, cachegrind).

// completeFind reads the rows a group of success reports settles: ?1 is
// a JSON object of the reports' run ids to their workers. INDEXED BY
// tasks_run and CROSS JOIN: one probe of tasks_run per report, never a
// read of the table (SQLite once planned an automatic index on tasks for
// a group's VALUES, built by reading the whole table at every commit).
// The columns are qualified: json_each has columns id and key too.
var completeFind = `SELECT ` + qualified("tasks", settledCols) + ` FROM json_each(?1) AS j
	CROSS JOIN tasks INDEXED BY tasks_run ON tasks.run_id = j.key
	WHERE run_worker = j.value AND run_status = 'RUNNING' AND run_stop = 0 AND workers = 1
		AND running = 1 AND successes = 0 AND done = 0 AND stop_requested = 0`

// qualified prefixes each column of cols (a list of names) with table.
func qualified(table, cols string) string {
	names := strings.Split(cols, ", ")
	for i, c := range names {
		names[i] = table + "." + c
	}
	return strings.Join(names, ", ")
}

// settleCols is what a success settles on a row completeFind read, but
// the report's instant (j.r_now), message (j.r_msg) and result
// (j.r_result): store.Settle's SUCCESS, done, one success, ended, and
// the run's the same. They are literals, checked against store.Settle
// for each report by settlesAsLiterals.
const settleCols = `status = 'SUCCESS', done = 1, avail = 0, successes = 1, running = 0,
		end_time = j.r_now, message = j.r_msg, result = coalesce(j.r_result, result), updated_at = j.r_now,
		run_status = 'SUCCESS', run_end = j.r_now, run_lease = 0, run_message = j.r_msg`

// completeSettle settles the rows of reports without a message or a
// result made at one instant: ?1 is a JSON array of their task ids, ?2
// the instant. OR FAIL: see noStatementJournal. NOT INDEXED: one probe of
// the primary key per report.
var completeSettle = settleFrom(`(SELECT value AS r_id, ?2 AS r_now, '' AS r_msg, NULL AS r_result FROM json_each(?1)) AS j`)

// completeSettleEach is completeSettle for reports made at more instants
// than maxSettleInstants: ?1 is a JSON object of their task ids to their
// instants. Reading each row's instant from JSON costs about 7,000
// instructions a report more than one bound instant, and one more
// statement about 25,000: a group of reports (a worker's batch, or a few)
// has one or two.
var completeSettleEach = settleFrom(`(SELECT key AS r_id, value AS r_now, '' AS r_msg, NULL AS r_result FROM json_each(?1)) AS j`)

// settleFrom is the UPDATE of the completeSettle statements: it settles
// (settleCols) the task of each row of j, the FROM item from (columns
// r_id, r_now, r_msg, r_result).
func settleFrom(from string) string {
	return `UPDATE OR FAIL tasks NOT INDEXED SET ` + settleCols + `
	FROM ` + from + `
	WHERE tasks.id = j.r_id`
}

// maxSettleInstants bounds the completeSettle statements of a group.
const maxSettleInstants = 4

// completeSettleCols are the values completeSettleRows takes for each
// report (a row of its VALUES).
const completeSettleCols = `r_id, r_now, r_msg, r_result`

// completeWidth is the number of completeSettleCols.
const completeWidth = 4

// completeSettleRows is completeSettle for rows rows of bound values
// (completeSettleCols), for reports with a message or a result (a string
// in JSON would have to be unescaped): a group of fewer reports pads with
// rows of NULLs, which match no task.
func completeSettleRows(rows int) string {
	row := "(" + inList(completeWidth) + ")"
	return `WITH j(` + completeSettleCols + `) AS (VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ") + `)
	` + settleFrom("j")
}

// settlesAsLiterals reports whether store.Settle settles success report
// p (on a single-worker task with no other run) as settleCols's literals
// do; a report it does not is settled alone, by completeInRow.
func settlesAsLiterals(p store.RunCompleteParams) bool {
	status, st := settleSuccess(p)
	return status == rota.StatusSuccess && st.Status == rota.StatusSuccess && st.Done && !st.Avail && st.Successes == 1 &&
		ms(st.EndTime) == ms(p.Now) && st.Message == p.Message && string(st.Result) == string(p.Result)
}

// maxGroupReports bounds the reports completeRows settles in one
// group of statements (the writer's default MaxBatch).
const maxGroupReports = 256

// completeSetRows are the row counts completeSettleRows is prepared
// with: the powers of two up to completeSetStep, then its multiples up
// to maxGroupReports. A group pads to the next count; with powers of two
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

// completeSetQueries[i] is completeSettleRows(completeSetRows[i]): one
// statement text (and prepared statement) per row count.
var completeSetQueries = func() []string {
	var qs []string
	for _, n := range completeSetRows {
		qs = append(qs, completeSettleRows(n))
	}
	return qs
}()

// completeSetQuery returns the completeSettleRows statement for n
// reports (1 <= n <= maxGroupReports) and its number of rows.
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

// completeRows settles the success reports of reps (they name distinct
// runs) in a group of statements: what each settled is kept for its
// operation, which then only reads. A report whose run completeFind did
// not find (any other state than completeInRow's) takes the general path
// in its operation. More reports than one group takes are settled in
// several.
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
	byRun := make(map[string]*groupReport, len(reps))
	runs := make([]byte, 0, 2+len(reps)*(len(reps[0].p.RunID)+len(reps[0].p.WorkerID)+6))
	for i, g := range reps {
		g.set, g.rep = true, nil
		byRun[g.p.RunID] = g
		runs = append(runs, ',')
		if i == 0 {
			runs[0] = '{'
		}
		runs = jsonwire.AppendString(runs, g.p.RunID)
		runs = append(runs, ':')
		runs = jsonwire.AppendString(runs, g.p.WorkerID)
	}
	res, err := tx.QueryContext(ctx, completeFind, string(append(runs, '}')))
	if err != nil {
		return fmt.Errorf("sqlitestore: complete runs: %w", err)
	}
	defer res.Close()
	scans := make([]settledScan, len(reps)) // a row per report at most
	var read []any
	found := 0
	for res.Next() {
		if found == len(scans) {
			return fmt.Errorf("sqlitestore: complete runs: more rows than reports")
		}
		sc := &scans[found]
		if read, err = sc.scan(res, read); err != nil {
			return fmt.Errorf("sqlitestore: complete runs: %w", err)
		}
		if g := byRun[sc.runID]; g != nil && sc.live(g.p) {
			if g.rep, err = sc.settle(g.p); err != nil {
				return fmt.Errorf("sqlitestore: complete runs: %w", err)
			}
			found++
		}
	}
	if err := res.Close(); err != nil {
		return fmt.Errorf("sqlitestore: complete runs: %w", err)
	}
	return settleRows(ctx, tx, reps, found)
}

// settleRows writes what found of reps settled (those whose rep is set):
// completeSettle for those without a message or result, a statement per
// instant (completeSettleEach for all when they have more than
// maxSettleInstants); completeSettleRows for the others.
func settleRows(ctx context.Context, tx *wtx, reps []*groupReport, found int) error {
	var (
		plain []*groupReport // without a message or result
		nows  []int64        // their instants, each once
		args  []any          // the rows of the others
	)
	for _, g := range reps {
		if g.rep == nil {
			continue
		}
		if g.p.Message == "" && len(g.p.Result) == 0 {
			if plain == nil {
				plain = make([]*groupReport, 0, found)
			}
			plain = append(plain, g)
			if now := ms(g.p.Now); !slices.Contains(nows, now) {
				nows = append(nows, now)
			}
			continue
		}
		var result any
		if len(g.p.Result) > 0 {
			result = string(g.p.Result)
		}
		args = append(args, g.rep.task.ID, ms(g.p.Now), g.p.Message, result)
	}
	ids := make([]byte, 0, 2+len(plain)*(len(reps[0].p.RunID)+24))
	switch {
	case len(nows) > maxSettleInstants:
		for _, g := range plain {
			ids = append(ids, ',')
			ids = jsonwire.AppendString(ids, g.rep.task.ID)
			ids = append(ids, ':')
			ids = jsonwire.AppendInt(ids, ms(g.p.Now))
		}
		ids[0] = '{'
		if _, err := tx.ExecContext(ctx, completeSettleEach, string(append(ids, '}'))); err != nil {
			return fmt.Errorf("sqlitestore: complete runs: %w", err)
		}
	default:
		for _, now := range nows {
			ids = ids[:0]
			for _, g := range plain {
				if ms(g.p.Now) == now {
					ids = append(ids, ',')
					ids = jsonwire.AppendString(ids, g.rep.task.ID)
				}
			}
			ids[0] = '['
			if _, err := tx.ExecContext(ctx, completeSettle, string(append(ids, ']')), now); err != nil {
				return fmt.Errorf("sqlitestore: complete runs: %w", err)
			}
		}
	}
	if len(args) == 0 {
		return nil
	}
	q, rows := completeSetQuery(len(args) / completeWidth)
	for len(args) < rows*completeWidth {
		args = append(args, nil) // padding rows: no task matches NULL
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
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
