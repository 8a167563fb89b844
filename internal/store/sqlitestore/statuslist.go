package sqlitestore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// Lists and counts by status without an index led by status.
//
// Migration 0013 dropped tasks_status_id (status, id): a claim and a
// report each moved a task in it (a delete and an insert apiece), a
// quarter of the index writes of a task, on the writer, which every write
// waits for. tasks_kind_status (kind, status), which the id of a WITHOUT
// ROWID table completes to (kind, status, id), serves what it served: a
// page of one kind and one status is one seek in list order, so a page of
// several is a merge of such seeks (taskListByParts); and counts group by
// kind, then status (countQuery), in that index's order.
//
// Migration 0015 left out of tasks_kind_status the tasks whose row holds
// a running run (run_lease <> 0), so that a claim only deletes a task's
// entry and its report only inserts it, where each moved it. Those tasks
// are the entries of tasks_running (run_status = 'RUNNING'; a row holds a
// lease exactly while its run runs, which Check verifies), all of them
// RUNNING. So a statement of a list or count by status reads one of two
// disjoint sets of rows (rowSet), each through its index: the idle rows
// (tasks_kind_status), and, when the statuses include RUNNING, the
// running ones (tasks_running, few: one per running run).

// rowSet is the rows of tasks a statement of a list or count reads.
type rowSet int

const (
	allRows     rowSet = iota // every row: a list by no status
	idleRows                  // run_lease = 0: the rows of tasks_kind_status
	runningRows               // run_status = 'RUNNING': the rows of tasks_running
)

// restrict returns q, a statement of store.TaskListQuery or
// store.TaskCountQuery ("SELECT … FROM tasks[ WHERE …] …"), reading
// only rows: their condition comes first in its WHERE clause (whose
// conditions are joined by AND), and the running rows are read through
// tasks_running.
func restrict(q string, rows rowSet) (string, error) {
	if rows == allRows {
		return q, nil
	}
	const from = " FROM tasks"
	i := strings.Index(q, from)
	if i < 0 {
		return "", fmt.Errorf("sqlitestore: no FROM tasks in %q", q)
	}
	head, tail := q[:i+len(from)], q[i+len(from):]
	cond := "run_lease = 0"
	if rows == runningRows {
		head, cond = head+" INDEXED BY tasks_running", "run_status = 'RUNNING'"
	}
	if rest, ok := strings.CutPrefix(tail, " WHERE "); ok {
		return head + " WHERE " + cond + " AND " + rest, nil
	}
	return head + " WHERE " + cond + tail, nil
}

// listPart is one statement of a list: the tasks of rows that p lists.
type listPart struct {
	p    store.TaskListParams
	rows rowSet
}

// listQuery is the statement of part, its arguments and its page size.
func listQuery(part listPart) (string, []any, int, error) {
	q, args, limit := store.TaskListQuery(part.p, func(int) string { return "?" })
	q, err := restrict(q, part.rows)
	return q, args, limit, err
}

// maxListParts bounds the seeks of one page: beyond it (a great many
// kinds) the page is the statements of p as a whole, as for other filters.
const maxListParts = 64

// listParts returns the statements of the page p asks for, whose pages
// merge into it (one part: its page). A list by no status is one
// statement of every row. A list by status that filters by nothing a
// seek of tasks_kind_status cannot serve better than its own index is a
// seek per kind and status of the idle rows, and one per kind of the
// running rows when the statuses include RUNNING; kinds come from the
// tasks, not the kinds table (nothing keeps a task from naming a kind of
// no row). Any other list by status is p over the idle rows and, with
// RUNNING, over the running ones.
func (s *Store) listParts(ctx context.Context, p store.TaskListParams) ([]listPart, error) {
	// Each status once: a status named twice would list its tasks twice.
	statuses := slices.Compact(slices.Sorted(slices.Values(p.Statuses)))
	if p.Status != "" {
		statuses = []rota.Status{p.Status}
	}
	if len(statuses) == 0 {
		return []listPart{{p, allRows}}, nil
	}
	running := slices.Contains(statuses, rota.StatusRunning)
	whole := []listPart{{p, idleRows}}
	if running {
		whole = append(whole, listPart{p, runningRows})
	}
	if p.Key != "" || p.WorkerID != "" || p.DependsOn != "" || p.ScheduleID != "" || p.Search != "" {
		return whole, nil
	}
	if p.Status != "" && len(p.Statuses) > 0 {
		return whole, nil // both filters: rare, left to the statements of p
	}
	kinds := []string{p.Kind}
	if p.Kind == "" {
		var err error
		if kinds, err = s.taskKinds(ctx, maxListParts+1); err != nil {
			return nil, err
		}
	}
	n := len(kinds) * len(statuses)
	if running {
		n += len(kinds)
	}
	if len(kinds) == 0 || n > maxListParts {
		return whole, nil
	}
	parts := make([]listPart, 0, n)
	for _, k := range kinds {
		for _, st := range statuses {
			q := p
			q.Kind, q.Status, q.Statuses = k, st, nil
			parts = append(parts, listPart{q, idleRows})
		}
		if running {
			q := p
			q.Kind, q.Status, q.Statuses = k, rota.StatusRunning, nil
			parts = append(parts, listPart{q, runningRows})
		}
	}
	return parts, nil
}

// taskKindsQuery lists the distinct kinds of the tasks, one seek of
// tasks_kind_status per kind (a loose index scan) rather than a read of
// the whole index.
const taskKindsQuery = `WITH RECURSIVE k(kind) AS (
	SELECT (SELECT min(kind) FROM tasks)
	UNION ALL
	SELECT (SELECT min(kind) FROM tasks WHERE kind > k.kind) FROM k WHERE k.kind IS NOT NULL LIMIT ?)
	SELECT kind FROM k WHERE kind IS NOT NULL`

// taskKinds returns up to max distinct kinds of the tasks, in order.
func (s *Store) taskKinds(ctx context.Context, max int) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, taskKindsQuery, max+1)
	if err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: kinds of the tasks: %w", err))
	}
	return collectRows(rows, "kind", func(sc scanner) (*string, error) {
		var k string
		return &k, sc.Scan(&k)
	})
}

// taskListByParts lists the page p asks for as a merge of the pages of
// parts (listParts), each read in list order.
func (s *Store) taskListByParts(ctx context.Context, p store.TaskListParams, parts []listPart) (store.TaskListResult, error) {
	var tasks []rota.Task
	limit := 0
	for _, part := range parts {
		got, l, err := s.taskListRows(ctx, part)
		if err != nil {
			return store.TaskListResult{}, err
		}
		tasks, limit = append(tasks, got...), l
	}
	slices.SortFunc(tasks, listOrder(p.Sort))
	if len(tasks) > limit+1 {
		tasks = tasks[:limit+1]
	}
	return p.Page(tasks, limit), nil
}

// listOrder compares two tasks in the order of a list sorted by sort
// (store.TaskListParams.order): the sort field's value, then the id, in
// the same direction; by default, newest id first.
func listOrder(sort store.TaskSort) func(a, b rota.Task) int {
	value := func(t *rota.Task) int64 {
		switch store.TaskSortFields[sort.Field] {
		case "created_at":
			return store.Millis(t.CreatedAt)
		case "run_at":
			return store.Millis(t.RunAt)
		case "end_time":
			return store.Millis(t.EndTime)
		}
		return 0
	}
	return func(a, b rota.Task) int {
		c := cmp.Or(cmp.Compare(value(&a), value(&b)), strings.Compare(a.ID, b.ID))
		if sort.Field == "" || !sort.Asc {
			return -c
		}
		return c
	}
}

// countQuery is store.TaskCountQuery for p over the idle rows, then over
// the running ones (see rowSet: together, every row once), each grouped
// by kind then status when p names no kind: the order of
// tasks_kind_status, which a count by status alone would have to sort.
// The caller sums the rows of a status (one a kind and set of rows).
func countQuery(p store.TaskListParams) (string, []any, error) {
	q, args := store.TaskCountQuery(p, func(int) string { return "?" })
	const by = " GROUP BY status"
	if p.Kind == "" && strings.HasSuffix(q, by) {
		q = strings.TrimSuffix(q, by) + " GROUP BY kind, status"
	}
	idle, err := restrict(q, idleRows)
	if err != nil {
		return "", nil, err
	}
	running, err := restrict(q, runningRows)
	if err != nil {
		return "", nil, err
	}
	return idle + " UNION ALL " + running, append(slices.Clip(args), args...), nil
}

// statsQuery counts the tasks by kind and status as countQuery does, for
// Stats: a read of tasks_kind_status alone, and of tasks_running.
const statsQuery = `SELECT kind, status, COUNT(*) FROM tasks WHERE run_lease = 0 GROUP BY kind, status
	UNION ALL SELECT kind, status, COUNT(*) FROM tasks INDEXED BY tasks_running WHERE run_status = 'RUNNING' GROUP BY kind, status`
