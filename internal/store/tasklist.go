package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rotahq/rota"
)

// This file holds the shared parts of task listing beyond the filters of
// backend.go: the sort orders and their cursors, the time-range filters,
// the history aggregate of finished tasks and the bounds of bulk actions.

// TaskSort orders a task list by one of TaskSortFields, then by id in
// the same direction (so that the order is total and a cursor exact).
// The zero value is the default order: newest first by id.
type TaskSort struct {
	Field string // a key of TaskSortFields; "" = by id
	Asc   bool   // ascending; else descending
}

// TaskSortFields maps the sort names of the API to their columns.
// Unfinished tasks have no end time: they sort as if it were 0.
var TaskSortFields = map[string]string{
	"created":  "created_at",
	"run_at":   "run_at",
	"finished": "end_time",
}

// ParseTaskSort reads a sort parameter: a name of TaskSortFields, with a
// leading "-" for descending ("-run_at"); "" is the default order.
func ParseTaskSort(v string) (TaskSort, error) {
	if v == "" {
		return TaskSort{}, nil
	}
	name, desc := strings.CutPrefix(v, "-")
	if _, ok := TaskSortFields[name]; !ok {
		return TaskSort{}, rota.Invalid("sort", "must be one of created, run_at, finished, each optionally prefixed with - for descending; got %q", v)
	}
	return TaskSort{Field: name, Asc: !desc}, nil
}

// String is the sort's API name ("" for the default).
func (s TaskSort) String() string {
	if s.Field == "" {
		return ""
	}
	if s.Asc {
		return s.Field
	}
	return "-" + s.Field
}

// sortValue is the value of the sort's column of t, in unix ms.
func (s TaskSort) sortValue(t *rota.Task) int64 {
	switch s.Field {
	case "created":
		return Millis(t.CreatedAt)
	case "run_at":
		return Millis(t.RunAt)
	}
	return Millis(t.EndTime)
}

// ParseSortCursor reads the cursor of a sorted list: "<unix ms>.<task
// id>", the sort value and id of the last task of the previous page.
func ParseSortCursor(v string) (value int64, id string, err error) {
	a, b, ok := strings.Cut(v, ".")
	n, perr := strconv.ParseInt(a, 10, 64)
	if !ok || perr != nil || n < 0 || len(b) != 32 || strings.Trim(b, "0123456789abcdef") != "" {
		return 0, "", rota.Invalid("cursor", "must be the next_cursor of a previous page of the same sort, got %q", v)
	}
	return n, b, nil
}

// order renders the ORDER BY of p's sort, and its cursor condition when
// p has a cursor (a cursor that does not parse matches nothing).
func (p TaskListParams) order(ph func(v any) string) (orderBy, after string) {
	if p.Sort.Field == "" {
		if p.Cursor != "" {
			after = "id < " + ph(p.Cursor)
		}
		return "id DESC", after
	}
	col, dir, cmp := TaskSortFields[p.Sort.Field], "DESC", "<"
	if p.Sort.Asc {
		dir, cmp = "ASC", ">"
	}
	if p.Cursor != "" {
		v, id, err := ParseSortCursor(p.Cursor)
		if err != nil {
			return col + " " + dir + ", id " + dir, "1 = 0"
		}
		after = fmt.Sprintf("(%s %s %s OR (%s = %s AND id %s %s))", col, cmp, ph(v), col, ph(v), cmp, ph(id))
	}
	return col + " " + dir + ", id " + dir, after
}

// Page makes the page of a TaskList from the rows its TaskListQuery read
// (up to limit+1, in the list's order): at most limit tasks, and the
// cursor of the next page when there are more.
func (p TaskListParams) Page(tasks []rota.Task, limit int) TaskListResult {
	res := TaskListPage(tasks, limit)
	if res.NextCursor != "" && p.Sort.Field != "" {
		last := &res.Tasks[len(res.Tasks)-1]
		res.NextCursor = strconv.FormatInt(p.Sort.sortValue(last), 10) + "." + last.ID
	}
	return res
}

// timeFilter renders p's schedule and time-range filters.
func (p TaskListParams) timeFilter(ph func(v any) string) (where []string) {
	if p.ScheduleID != "" {
		where = append(where, "schedule_id = "+ph(p.ScheduleID))
	}
	ranges := []struct {
		col           string
		after, before time.Time
	}{
		{"created_at", p.CreatedAfter, p.CreatedBefore},
		{"run_at", p.RunAfter, p.RunBefore},
		{"end_time", p.FinishedAfter, p.FinishedBefore},
	}
	for _, r := range ranges {
		if !r.after.IsZero() {
			where = append(where, r.col+" >= "+ph(r.after.UnixMilli()))
		}
		if !r.before.IsZero() {
			where = append(where, r.col+" < "+ph(r.before.UnixMilli()))
		}
	}
	if !p.FinishedBefore.IsZero() || !p.FinishedAfter.IsZero() {
		where = append(where, "end_time > 0") // unfinished tasks have none
	}
	return where
}

// Bounds of the bulk actions on tasks (POST /api/tasks/bulk).
const (
	// MaxBulkTasks is the most tasks one bulk job acts on.
	MaxBulkTasks = 10_000
	// BulkBatch is how many tasks a bulk job handles per step.
	BulkBatch = 500
)

// HistoryParams selects the finished tasks TaskHistory aggregates: those
// whose end time is in [From, From + Buckets·Bucket), by bucket.
type HistoryParams struct {
	From    time.Time
	Bucket  time.Duration // > 0
	Buckets int           // > 0
}

// HistoryBucket aggregates the tasks that finished in one bucket.
type HistoryBucket struct {
	Start     time.Time
	Succeeded int // SUCCESS
	Failed    int // FAILED or TIMEOUT
	Canceled  int // CANCELED or SKIPPED
	// Started counts those that ran (had a start time); the sums and
	// maxima below are over them, in milliseconds: Wait is start − run
	// at (the last attempt's time in the queue), Duration end − start.
	Started                      int
	WaitSumMs, WaitMaxMs         int64
	DurationSumMs, DurationMaxMs int64
}

// HistoryDialect is how a backend's SQL spells what TaskHistoryQuery
// needs beyond the common ground.
type HistoryDialect struct {
	Placeholder func(n int) string // the n-th argument, from 1
	IntDiv      string             // integer division: "/" (DIV in MySQL)
	Int64       string             // a CAST target of 64-bit integers: BIGINT (SIGNED in MySQL)
}

// TaskHistoryQuery is the statement of TaskHistory: rows of (bucket
// index, status, count, started, wait sum, wait max, duration sum,
// duration max), to hand to HistoryAdd.
func TaskHistoryQuery(p HistoryParams, d HistoryDialect) (string, []any) {
	from, bucket := p.From.UnixMilli(), p.Bucket.Milliseconds()
	to := from + bucket*int64(p.Buckets)
	agg := func(fn, expr string) string {
		return `CAST(coalesce(` + fn + `(CASE WHEN start_time > 0 THEN ` + expr + ` ELSE 0 END), 0) AS ` + d.Int64 + `)`
	}
	q := `SELECT (end_time - ` + d.Placeholder(1) + `) ` + d.IntDiv + ` ` + d.Placeholder(2) + ` AS b, status, count(*),
		count(CASE WHEN start_time > 0 THEN 1 END), ` +
		agg("sum", "start_time - run_at") + `, ` + agg("max", "start_time - run_at") + `, ` +
		agg("sum", "end_time - start_time") + `, ` + agg("max", "end_time - start_time") + `
		FROM tasks WHERE end_time >= ` + d.Placeholder(3) + ` AND end_time < ` + d.Placeholder(4) + `
		GROUP BY b, status`
	return q, []any{from, bucket, from, to}
}

// HistoryRow is one row of TaskHistoryQuery.
type HistoryRow struct {
	Bucket                                     int64
	Status                                     rota.Status
	Count, Started                             int
	WaitSum, WaitMax, DurationSum, DurationMax int64
}

// Dest returns the scan destinations of a row of TaskHistoryQuery.
func (r *HistoryRow) Dest() []any {
	return []any{&r.Bucket, &r.Status, &r.Count, &r.Started, &r.WaitSum, &r.WaitMax, &r.DurationSum, &r.DurationMax}
}

// NewHistory returns the empty buckets of p.
func NewHistory(p HistoryParams) []HistoryBucket {
	out := make([]HistoryBucket, p.Buckets)
	for i := range out {
		out[i].Start = p.From.Add(time.Duration(i) * p.Bucket).UTC()
	}
	return out
}

// HistoryAdd adds a row of TaskHistoryQuery to its bucket of h.
func HistoryAdd(h []HistoryBucket, r HistoryRow) {
	if r.Bucket < 0 || r.Bucket >= int64(len(h)) {
		return
	}
	b := &h[r.Bucket]
	switch r.Status {
	case rota.StatusSuccess:
		b.Succeeded += r.Count
	case rota.StatusFailed, rota.StatusTimeout:
		b.Failed += r.Count
	case rota.StatusCanceled, rota.StatusSkipped:
		b.Canceled += r.Count
	default:
		return
	}
	b.Started += r.Started
	b.WaitSumMs += r.WaitSum
	b.WaitMaxMs = max(b.WaitMaxMs, r.WaitMax)
	b.DurationSumMs += r.DurationSum
	b.DurationMaxMs = max(b.DurationMaxMs, r.DurationMax)
}
