package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// The common report — a success of a single-worker task's run kept in its
// row, under a live lease, neither task nor run asked to stop — is settled
// without a lock step: one UPDATE for the whole group whose WHERE clause
// checks that state (completeFastSQL) and whose RETURNING gives each
// settled task whole, so the answer needs no read. The lock of the lock
// step is the UPDATE's own row lock: a concurrent change of the row
// (TaskStop, the reaper, another report of the run) makes PostgreSQL
// recheck the WHERE clause on the row's new version. A report the UPDATE
// did not settle (any other state, or a refusal: lease lost, expired, not
// found) goes the general path (lockGroup, applyGroup), which also
// explains the refusal; it wrote nothing here.

// completeFastSQL settles the success reports of the arrays $1..$5 (run
// id, worker, now, message, result), store.Settle's outcome for a
// single-worker task whose only running run succeeded: SUCCESS, done, one
// success, the run ended with the worker's message. Failures, run_at and
// holders are kept. The dependency trigger (tasks_deps_settle) fires as
// for any update of status.
//
// The tasks are found by primary key (id = ANY of the ids the runs name
// through tasks_run, an InitPlan), whatever the statistics say: they are
// usually taken while tasks were waiting, so a filter on running rows
// looks like one row to the planner, which then scanned every RUNNING row
// (tasks_running, or all of tasks_run) once per report — 99,900 rows
// filtered for 100 reports among 1,000 running. COALESCE keeps
// tasks_running's predicate unproven, so that index is not a way in.
//
// RETURNING reads the task as stored (taskCols), the run in its row, the
// kind's MaxRunning (a run that ended under a cap notifies the kind), and
// what a task read adds to it only when there is some: the runs of
// run_log (earlier attempts: attempt > 1) and the dependency links (which
// the update does not change).
var completeFastSQL = completeFastUpdate + `
	RETURNING ` + fastTaskCols + `, tasks.run_id, tasks.run_worker, tasks.run_start, tasks.run_deadline,
		` + fastKindCap + `,
		CASE WHEN tasks.attempt > 1 THEN (SELECT json_agg(json_build_object(
			'id', r.id, 'task_id', r.task_id, 'worker_id', r.worker_id, 'worker_address', r.worker_address,
			'attempt', r.attempt, 'status', r.status, 'start_time', r.start_time, 'end_time', r.end_time,
			'lease_expires_at', r.lease_expires_at, 'deadline', r.deadline, 'stop_requested', r.stop_requested,
			'message', r.message)) FROM run_log r WHERE r.task_id = tasks.id) END,
		CASE WHEN tasks.parents > 0 THEN ARRAY(SELECT d.dep_id FROM task_deps d WHERE d.task_id = tasks.id ORDER BY d.dep_id) END,
		` + fastDependents

// completeBriefSQL is completeFastSQL for reports that are all Brief
// (store.RunCompleteParams): RETURNING gives only what the report's
// answer and the dispatcher's events read that the report does not
// already say — the report's index (u.i, from 1), the task's id, kind,
// attempt, run_at, schedule and fire time, its result when the report
// gave none, the kind's MaxRunning and the dependents — 10 columns for
// the 35 of the whole task (whose decoding was a third of the server's
// allocated objects in an end-to-end run).
var completeBriefSQL = completeFastUpdate + `
	RETURNING u.i, tasks.id, tasks.kind, tasks.attempt, tasks.run_at, tasks.schedule_id, tasks.fire_time,
		CASE WHEN u.result IS NULL THEN tasks.result END, ` + fastKindCap + `, ` + fastDependents

// completeFastUpdate is the UPDATE of completeFastSQL and
// completeBriefSQL, without RETURNING.
const completeFastUpdate = `UPDATE tasks SET status = 'SUCCESS', avail = false, successes = 1, running = 0,
		end_time = u.now, message = u.message, result = COALESCE(u.result::json, tasks.result), updated_at = u.now,
		run_status = 'SUCCESS', run_end = u.now, run_lease = 0, run_message = u.message
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[]) WITH ORDINALITY AS u(run_id, worker, now, message, result, i)
	WHERE tasks.id = ANY (ARRAY(SELECT (SELECT t.id FROM tasks t WHERE t.run_id = r.id LIMIT 1) FROM unnest($1::text[]) AS r(id)))
		AND tasks.run_id = u.run_id AND tasks.run_worker = u.worker AND COALESCE(tasks.run_status, '') = 'RUNNING'
		AND NOT tasks.run_stop AND tasks.workers = 1 AND tasks.running = 1 AND tasks.successes = 0
		AND NOT tasks.done AND NOT tasks.stop_requested
		AND tasks.run_lease > u.now AND (tasks.run_deadline = 0 OR tasks.run_deadline > u.now)`

// fastKindCap and fastDependents are columns of the RETURNING lists: the
// kind's MaxRunning (a run that ended under a cap notifies the kind) and
// the task's dependents (none: NULL).
const (
	fastKindCap    = `COALESCE((SELECT max_running FROM kinds WHERE name = tasks.kind), 0)`
	fastDependents = `CASE WHEN tasks.dependents > 0 THEN ARRAY(SELECT d.task_id FROM task_deps d WHERE d.dep_id = tasks.id ORDER BY d.task_id) END`
)

// fastTaskCols is taskCols qualified by the table (the UPDATE's FROM list
// has columns of the same names).
var fastTaskCols = qualify("tasks", taskCols)

// qualify prefixes each column of a comma-separated list with table.
func qualify(table, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// fastEligible reports whether the report may try completeFastSQL: a
// success, not a release. A run reported twice in one group goes the
// general path each time, in order.
func fastEligible(p store.RunCompleteParams, dup bool) bool {
	return p.Success && !p.Release && !dup
}

// completeFast settles the reports of group that completeFastSQL settles,
// with one statement in one round trip, and returns the answer of each
// report (nil: not settled here, for the general path). When the
// statement fails it settles none.
func (s *Store) completeFast(group []*completeReq) []*rota.Task {
	out := make([]*rota.Task, len(group))
	count := make(map[string]int, len(group))
	for _, r := range group {
		count[r.p.RunID]++
	}
	var fast []*completeReq
	for _, r := range group {
		if fastEligible(r.p, count[r.p.RunID] > 1) {
			fast = append(fast, r)
		}
	}
	if len(fast) == 0 {
		return out
	}
	n := len(fast)
	runs, workers, msgs := make([]string, n), make([]string, n), make([]string, n)
	nows, results := make([]int64, n), make([]*string, n)
	for i, r := range fast {
		runs[i], workers[i], nows[i], msgs[i] = r.p.RunID, r.p.WorkerID, ms(r.p.Now), r.p.Message
		if len(r.p.Result) > 0 {
			v := string(r.p.Result)
			results[i] = &v
		}
	}
	// One statement outside a transaction block, a transaction of its
	// own: BEGIN and COMMIT around it would cost PostgreSQL two more
	// statements for nothing. Its answer comes after the commit (and the
	// WAL flush), so a settled report is durable. Once sent it is waited
	// for whatever the contexts do (see completeGroup).
	cctx, cancel := context.WithTimeout(context.WithoutCancel(fast[0].ctx), commitTimeout)
	defer cancel()
	brief := true
	for _, r := range fast {
		brief = brief && r.p.Brief
	}
	if brief {
		return s.completeBrief(cctx, group, fast, out, runs, workers, nows, msgs, results)
	}
	settled := make(map[string]*rota.Task, n)
	ns := make(notes)
	rows, err := s.pool.Query(cctx, completeFastSQL, runs, workers, nows, msgs, results)
	if err != nil {
		return out
	}
	for rows.Next() {
		task, runID, kindCap, err := scanFastRow(rows)
		if err != nil {
			// A row of the table's own columns that does not scan: the
			// statement commits all the same (Close reads it to its
			// end), and the general path answers these reports from
			// the rows as they now are.
			rows.Close()
			return out
		}
		settled[runID] = task
		if kindCap > 0 {
			// The run freed a place under its kind's cap.
			now := ms(task.EndTime)
			ns.add(task.Kind, now, now, true)
		}
	}
	rows.Close()
	if rows.Err() != nil {
		return out
	}
	s.post(ns)
	for i, r := range group {
		if fastEligible(r.p, count[r.p.RunID] > 1) {
			out[i] = settled[r.p.RunID]
		}
	}
	return out
}

// completeBrief is completeFast's end for reports that are all Brief
// (fast, whose arrays are runs..results): completeBriefSQL, whose rows
// are answered as the briefs the reports asked for, the tasks and their
// runs each in one array. out answers group (nil: not settled here).
func (s *Store) completeBrief(ctx context.Context, group, fast []*completeReq, out []*rota.Task,
	runs, workers []string, nows []int64, msgs []string, results []*string) []*rota.Task {
	rows, err := s.pool.Query(ctx, completeBriefSQL, runs, workers, nows, msgs, results)
	if err != nil {
		return out
	}
	var (
		settled  = make([]*rota.Task, len(fast))
		tasks    = make([]rota.Task, len(fast))
		taskRuns = make([]rota.Run, len(fast))
		ns       notes
		row      briefRow
	)
	dest := row.dest()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil || row.i < 1 || row.i > int64(len(fast)) {
			// Not a row of ours: the statement commits all the same
			// (Close reads it to its end), and the general path
			// answers these reports from the rows as they now are.
			rows.Close()
			return out
		}
		i := row.i - 1
		t, p := &tasks[i], &fast[i].p
		row.task(t, taskRuns[i:i+1:i+1], p)
		settled[i] = t
		if row.kindCap > 0 {
			// The run freed a place under its kind's cap.
			if ns == nil {
				ns = make(notes)
			}
			now := ms(p.Now)
			ns.add(t.Kind, now, now, true)
		}
	}
	rows.Close()
	if rows.Err() != nil {
		return out
	}
	s.post(ns)
	for i, j := 0, 0; i < len(group) && j < len(fast); i++ {
		if group[i] == fast[j] {
			out[i] = settled[j]
			j++
		}
	}
	return out
}

// briefRow is a row of completeBriefSQL's RETURNING.
type briefRow struct {
	i                    int64
	id, kind, scheduleID string
	attempt              int
	runAt, fireTime      int64
	result               []byte
	kindCap              int
	dependents           []string
}

func (b *briefRow) dest() []any {
	return []any{&b.i, &b.id, &b.kind, &b.attempt, &b.runAt, &b.scheduleID, &b.fireTime, &b.result, &b.kindCap, &b.dependents}
}

// task fills t and its one run, runs[0], as the brief answer to report p
// (the success that completeBriefSQL settled).
func (b *briefRow) task(t *rota.Task, runs []rota.Run, p *store.RunCompleteParams) {
	end := tm(ms(p.Now)) // as the store keeps it: milliseconds
	result := p.Result
	if len(result) == 0 && b.result != nil {
		result = json.RawMessage(b.result)
	}
	runs[0] = rota.Run{ID: p.RunID, TaskID: b.id, WorkerID: p.WorkerID, Attempt: b.attempt,
		Status: rota.StatusSuccess, EndTime: end, Message: p.Message}
	*t = rota.Task{ID: b.id, Kind: b.kind, Status: rota.StatusSuccess, IsSucceed: true, Attempt: b.attempt,
		Message: p.Message, Result: result, RunAt: tm(b.runAt), EndTime: end, ScheduleID: b.scheduleID,
		FireTime: tm(b.fireTime), Runs: runs}
	if len(b.dependents) > 0 {
		t.Dependents = b.dependents
	}
	b.result, b.dependents = nil, nil // the next row's own
}

// scanFastRow reads a row of completeFastSQL's RETURNING: the task as a
// read of it with its runs would give it (runs by id), and its kind's
// MaxRunning.
func scanFastRow(row pgx.Row) (*rota.Task, string, int, error) {
	var (
		runID, worker     string
		start, deadline   int64
		kindCap           int
		logRuns           []byte
		parents, children []string
	)
	t, err := scanTask(row, &runID, &worker, &start, &deadline, &kindCap, &logRuns, &parents, &children)
	if err != nil {
		return nil, "", 0, fmt.Errorf("settled task: %w", err)
	}
	var rs []runJSON
	if len(logRuns) > 0 {
		if err := json.Unmarshal(logRuns, &rs); err != nil {
			return nil, "", 0, fmt.Errorf("decode runs of task %s: %w", t.ID, err)
		}
	}
	out := t.Task
	out.Runs = make([]rota.Run, 0, len(rs)+1)
	for _, r := range rs {
		out.Runs = append(out.Runs, rota.Run{
			ID: r.ID, TaskID: r.TaskID, WorkerID: r.WorkerID, WorkerAddress: r.WorkerAddress, Attempt: r.Attempt,
			Status: r.Status, StartTime: tm(r.StartTime), EndTime: tm(r.EndTime), LeaseExpiresAt: tm(r.LeaseExpiresAt),
			Deadline: tm(r.Deadline), StopRequested: r.StopRequested, Message: r.Message,
		})
	}
	// The run in the row, as completeFastSQL left it.
	out.Runs = append(out.Runs, rota.Run{
		ID: runID, TaskID: t.ID, WorkerID: worker, WorkerAddress: t.WorkerAddress,
		Attempt: t.Attempt, Status: rota.StatusSuccess, StartTime: tm(start), EndTime: t.EndTime,
		LeaseExpiresAt: tm(0), Deadline: tm(deadline), Message: t.Message,
	})
	slices.SortFunc(out.Runs, func(a, b rota.Run) int { return strings.Compare(a.ID, b.ID) })
	if len(parents) > 0 {
		out.DependsOn = parents
	}
	if len(children) > 0 {
		out.Dependents = children
	}
	return &out, runID, kindCap, nil
}
