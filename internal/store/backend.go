package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rotahq/rota"
)

// This file holds what every backend does alike: instants as stored, the
// errors a client sees, the reading of task and run rows, task listing
// and the invariant checks. Only SQL that differs by dialect stays in the
// backends.

// Millis is t as stored: unix milliseconds, 0 for the zero time.
func Millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMillis is the inverse of Millis, in UTC (0 is the zero time).
func FromMillis(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// NotFoundError is the rota.ErrNotFound a client sees for the missing what
// (task, run, kind, schedule) id.
func NotFoundError(what, id string) error {
	return rota.Errorf(rota.CodeNotFound, "%s %s not found", what, id)
}

// ConflictError is a rota.ErrConflict with a formatted message.
func ConflictError(format string, args ...any) error {
	return rota.Errorf(rota.CodeConflict, format, args...)
}

// LeaseLostError is the rota.ErrLeaseLost of a report or heartbeat on run
// runID, saying why the worker no longer holds it.
func LeaseLostError(runID, why string) error {
	return rota.Errorf(rota.CodeLeaseLost, "run %s is no longer held by this worker: %s", runID, why)
}

// TaskColumns are the columns of the tasks table a TaskScan reads, in the
// order of TaskScan.Dest. "key" is quoted: it is a reserved word in MySQL
// (which mysqlstore runs with ANSI_QUOTES).
const TaskColumns = `id, kind, level, payload, "key", status, done, avail, attempt, failures, successes, running,
	max_retries, workers, worker_ids, timeout_s, hb_timeout_s, stop_requested, created_at, run_at,
	start_time, end_time, worker_address, message, result, schedule_id, fire_time`

// TaskRow is a task as a backend stores it: the domain task plus the
// bookkeeping columns the domain type hides.
type TaskRow struct {
	rota.Task
	Done, Avail, StopRequested   bool
	Failures, Successes, Running int
}

// TaskScan reads one row of TaskColumns: scan into Dest, then take the
// task from Row. The zero value is ready; use one TaskScan per row.
type TaskScan struct {
	row                              TaskRow
	level                            int
	payload, result                  []byte
	key                              *string
	created, runAt, start, end, fire int64
}

// Dest returns the scan destinations of TaskColumns, then extra. The
// destination of worker_ids is the backend's own (an array in
// PostgreSQL, JSON text in SQLite): the backend decodes it and hands the
// ids to Row.
func (s *TaskScan) Dest(workerIDs any, extra ...any) []any {
	r := &s.row
	return append([]any{&r.ID, &r.Kind, &s.level, &s.payload, &s.key, &r.Status, &r.Done, &r.Avail, &r.Attempt,
		&r.Failures, &r.Successes, &r.Running, &r.MaxRetries, &r.Workers, workerIDs, &r.TimeoutSeconds,
		&r.HeartbeatTimeoutSeconds, &r.StopRequested, &s.created, &s.runAt, &s.start, &s.end, &r.WorkerAddress,
		&r.Message, &s.result, &r.ScheduleID, &s.fire}, extra...)
}

// Row returns the task scanned, with workerIDs (none: nil).
func (s *TaskScan) Row(workerIDs []string) TaskRow {
	r := s.row
	r.Priority = rota.PriorityOfLevel(s.level)
	if s.payload != nil {
		r.Payload = json.RawMessage(s.payload)
	}
	if s.result != nil {
		r.Result = json.RawMessage(s.result)
	}
	if s.key != nil {
		r.Key = *s.key
	}
	if len(workerIDs) > 0 {
		r.WorkerIDs = workerIDs
	}
	r.CreatedAt, r.RunAt, r.StartTime = FromMillis(s.created), FromMillis(s.runAt), FromMillis(s.start)
	r.EndTime, r.FireTime = FromMillis(s.end), FromMillis(s.fire)
	r.IsSucceed = r.Status == rota.StatusSuccess
	return r
}

// RunColumns are the columns of the runs table a RunScan reads, in the
// order of RunScan.Dest.
const RunColumns = `id, task_id, worker_id, worker_address, attempt, status, start_time, end_time,
	lease_expires_at, deadline, stop_requested, message`

// RunScan reads one row of RunColumns: scan into Dest, then take the run
// from Run. The zero value is ready; use one RunScan per row.
type RunScan struct {
	run                         rota.Run
	start, end, lease, deadline int64
}

// Dest returns the scan destinations of RunColumns, then extra.
func (s *RunScan) Dest(extra ...any) []any {
	r := &s.run
	return append([]any{&r.ID, &r.TaskID, &r.WorkerID, &r.WorkerAddress, &r.Attempt, &r.Status, &s.start, &s.end,
		&s.lease, &s.deadline, &r.StopRequested, &r.Message}, extra...)
}

// Run returns the run scanned.
func (s *RunScan) Run() rota.Run {
	r := s.run
	r.StartTime, r.EndTime = FromMillis(s.start), FromMillis(s.end)
	r.LeaseExpiresAt, r.Deadline = FromMillis(s.lease), FromMillis(s.deadline)
	return r
}

// DefaultTaskListLimit is the page size of a TaskList without a Limit.
const DefaultTaskListLimit = 100

// TaskListQuery is the statement of a TaskList page: the tasks matching
// p's filters, in p's sort order (default newest, highest id, first),
// after p's cursor, reading
// TaskColumns plus one row past the page so that TaskListPage can tell
// whether another page follows. placeholder renders the n-th argument
// (from 1) in the backend's dialect. limit is the page size to hand to
// p.Page.
func TaskListQuery(p TaskListParams, placeholder func(n int) string) (query string, args []any, limit int) {
	return TaskListQueryHinted(p, placeholder, nil)
}

// StatusHint returns a condition over the tasks table that every task
// with one of statuses (one or more) meets, or "" for none: a backend's
// way to let a prepared list statement use a partial index. A generic plan
// cannot tell that status = $1 implies an index's predicate, but it sees
// the predicate itself among the statement's conditions. The condition
// must not filter out a task of those statuses; it only narrows the rows
// the plan reads.
type StatusHint func(statuses []rota.Status) string

// TaskListQueryHinted is TaskListQuery with the condition hint gives for
// p's status filter (when p has one and hint is not nil) added.
func TaskListQueryHinted(p TaskListParams, placeholder func(n int) string, hint StatusHint) (query string, args []any, limit int) {
	where, args := taskFilter(p, true, placeholder)
	if hint != nil {
		statuses := p.Statuses
		if p.Status != "" {
			statuses = []rota.Status{p.Status}
		}
		if len(statuses) > 0 {
			if h := hint(statuses); h != "" {
				where = append(where, "("+h+")")
			}
		}
	}
	orderBy, after := p.order(func(v any) string {
		args = append(args, v)
		return placeholder(len(args))
	})
	if after != "" {
		where = append(where, after)
	}
	limit = p.Limit
	if limit <= 0 {
		limit = DefaultTaskListLimit
	}
	query = `SELECT ` + TaskColumns + ` FROM tasks`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit+1)
	query += " ORDER BY " + orderBy + " LIMIT " + placeholder(len(args))
	return query, args, limit
}

// TaskCountQuery is the statement of TaskCountByStatus: (status, count)
// rows of the tasks matching p's filters but its statuses, cursor and
// limit.
func TaskCountQuery(p TaskListParams, placeholder func(n int) string) (query string, args []any) {
	where, args := taskFilter(p, false, placeholder)
	query = `SELECT status, count(*) FROM tasks`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	return query + " GROUP BY status", args
}

// likeEscaper escapes the wildcards of a LIKE pattern (ESCAPE '\').
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// taskFilter renders p's filters as conditions over the tasks table, with
// its statuses when withStatus.
func taskFilter(p TaskListParams, withStatus bool, placeholder func(n int) string) (where []string, args []any) {
	ph := func(v any) string {
		args = append(args, v)
		return placeholder(len(args))
	}
	if p.Kind != "" {
		where = append(where, "kind = "+ph(p.Kind))
	}
	if withStatus && p.Status != "" {
		where = append(where, "status = "+ph(string(p.Status)))
	}
	if withStatus && len(p.Statuses) > 0 {
		in := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			in[i] = ph(string(st))
		}
		where = append(where, "status IN ("+strings.Join(in, ", ")+")")
	}
	if p.Key != "" {
		where = append(where, `"key" = `+ph(p.Key))
	}
	if p.Priority != "" {
		where = append(where, "level = "+ph(p.Priority.Level()))
	}
	if p.WorkerID != "" {
		where = append(where, "id IN (SELECT task_id FROM runs WHERE worker_id = "+ph(p.WorkerID)+")")
	}
	if p.DependsOn != "" {
		where = append(where, "id IN (SELECT task_id FROM task_deps WHERE dep_id = "+ph(p.DependsOn)+")")
	}
	if p.Search != "" {
		like := "%" + likeEscaper.Replace(strings.ToLower(p.Search)) + "%"
		where = append(where, "(id = "+ph(strings.ToLower(p.Search))+
			` OR lower("key") LIKE `+ph(like)+` ESCAPE '\'`+
			" OR lower(message) LIKE "+ph(like)+` ESCAPE '\')`)
	}
	return append(where, p.timeFilter(ph)...), args
}

// TaskListPage makes the page of a TaskList from the rows its
// TaskListQuery read (up to limit+1, newest first): at most limit tasks,
// and the cursor of the next page when there are more.
func TaskListPage(tasks []rota.Task, limit int) TaskListResult {
	res := TaskListResult{Tasks: tasks}
	if len(tasks) > limit {
		res.Tasks = tasks[:limit]
		res.NextCursor = res.Tasks[limit-1].ID
	}
	return res
}

// ApplyTo applies the update to the task read for it, which a backend
// then stores: rota.ErrConflict for a finished task, else the changed
// fields set (WorkerIDs copied). stopDisallowed says whether the task's
// running runs of workers not in its new, non-empty WorkerIDs must be
// asked to stop.
func (p TaskUpdateParams) ApplyTo(t *TaskRow) (stopDisallowed bool, err error) {
	if t.Done {
		return false, ConflictError("task %s is already %s", t.ID, t.Status)
	}
	if p.Priority != nil {
		t.Priority = *p.Priority
	}
	if p.MaxRetries != nil {
		t.MaxRetries = *p.MaxRetries
	}
	if p.HeartbeatTimeoutSeconds != nil {
		t.HeartbeatTimeoutSeconds = *p.HeartbeatTimeoutSeconds
	}
	if p.WorkerIDs != nil {
		t.WorkerIDs = append([]string(nil), (*p.WorkerIDs)...)
	}
	return p.WorkerIDs != nil && len(t.WorkerIDs) > 0, nil
}

// DefaultStopMessage is the message of a task stopped without one.
const DefaultStopMessage = "stopped"

// MessageFor is the message a stop leaves on the task read for it, or
// rota.ErrConflict for a finished task, which cannot be stopped.
func (p TaskStopParams) MessageFor(t *TaskRow) (string, error) {
	if t.Done {
		return "", ConflictError("task %s is already %s and cannot be stopped", t.ID, t.Status)
	}
	if p.Message == "" {
		return DefaultStopMessage, nil
	}
	return p.Message, nil
}

// TaskInvariants are the invariants every backend's Check verifies, in SQL
// both dialects read alike; a backend adds its own.
func TaskInvariants() []Invariant {
	return []Invariant{
		{What: "task running counter differs from its RUNNING runs", Query: `SELECT t.id FROM tasks t WHERE t.running <>
			(SELECT count(*) FROM runs r WHERE r.task_id = t.id AND r.status = 'RUNNING') LIMIT 5`},
		{What: "task successes counter differs from its SUCCESS runs", Query: `SELECT t.id FROM tasks t WHERE t.successes <>
			(SELECT count(*) FROM runs r WHERE r.task_id = t.id AND r.status = 'SUCCESS') LIMIT 5`},
		{What: "WAITING task available or without a dependency to wait for", Query: `SELECT id FROM tasks
			WHERE (status = 'WAITING' AND (deps_waiting = 0 OR avail <> false))
			OR (status IN ('SCHEDULED', 'RUNNING') AND deps_waiting > 0) LIMIT 5`},
		{What: "RUNNING task without running runs", Query: `SELECT id FROM tasks WHERE status = 'RUNNING' AND running = 0 LIMIT 5`},
	}
}

// Add records that RunExpire ended a run of task taskID of kind: one more
// expired, the task in expiry order, the kind once.
func (r *RunExpireResult) Add(taskID, kind string) {
	r.Expired++
	r.Tasks = append(r.Tasks, taskID)
	for _, k := range r.Kinds {
		if k == kind {
			return
		}
	}
	r.Kinds = append(r.Kinds, kind)
}

// Invariant is one consistency check of a backend's Check: Query returns
// the ids (at most a few) of the rows that break the rule What.
type Invariant struct {
	What  string
	Query string
}

// CheckInvariants runs every invariant's query with ids (which returns the
// ids the query found) and returns one error per broken invariant, joined
// (nil when all hold). An error of ids itself stops the check and is
// returned wrapped.
func CheckInvariants(invs []Invariant, ids func(query string) ([]string, error)) error {
	var errs []error
	for _, inv := range invs {
		found, err := ids(inv.Query)
		if err != nil {
			return fmt.Errorf("check %q: %w", inv.What, err)
		}
		if len(found) > 0 {
			errs = append(errs, fmt.Errorf("%s: %v", inv.What, found))
		}
	}
	return errors.Join(errs...)
}
