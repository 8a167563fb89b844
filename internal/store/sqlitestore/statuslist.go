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

// maxListParts bounds the (kind, status) seeks of one page: beyond it
// (a great many kinds) the page is one statement, as for other filters.
const maxListParts = 64

// listParts returns the (kind, status) pairs that partition the tasks p
// lists, when p filters by status and by nothing a seek of
// tasks_kind_status cannot serve better than its own index; nil
// otherwise. Kinds come from the tasks, not the kinds table (nothing
// keeps a task from naming a kind of no row).
func (s *Store) listParts(ctx context.Context, p store.TaskListParams) ([]store.TaskListParams, error) {
	// Each status once: a status named twice would list its tasks twice.
	statuses := slices.Compact(slices.Sorted(slices.Values(p.Statuses)))
	if p.Status != "" {
		statuses = []rota.Status{p.Status}
	}
	if len(statuses) == 0 || p.Key != "" || p.WorkerID != "" || p.DependsOn != "" || p.ScheduleID != "" || p.Search != "" {
		return nil, nil
	}
	if p.Status != "" && len(p.Statuses) > 0 {
		return nil, nil // both filters: rare, left to the single statement
	}
	kinds := []string{p.Kind}
	if p.Kind == "" {
		var err error
		if kinds, err = s.taskKinds(ctx, maxListParts+1); err != nil {
			return nil, err
		}
	}
	if len(kinds)*len(statuses) > maxListParts || len(kinds)*len(statuses) <= 1 {
		return nil, nil
	}
	parts := make([]store.TaskListParams, 0, len(kinds)*len(statuses))
	for _, k := range kinds {
		for _, st := range statuses {
			q := p
			q.Kind, q.Status, q.Statuses = k, st, nil
			parts = append(parts, q)
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
// parts, each one seek of tasks_kind_status in list order.
func (s *Store) taskListByParts(ctx context.Context, p store.TaskListParams, parts []store.TaskListParams) (store.TaskListResult, error) {
	var tasks []rota.Task
	limit := 0
	for _, q := range parts {
		got, l, err := s.taskListRows(ctx, q)
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

// countQuery is store.TaskCountQuery for p, grouped by kind then status
// when p names no kind: the order of tasks_kind_status, which a count by
// status alone would have to sort. countByStatus sums the kinds.
func countQuery(p store.TaskListParams) (string, []any) {
	q, args := store.TaskCountQuery(p, func(int) string { return "?" })
	const by = " GROUP BY status"
	if p.Kind == "" && strings.HasSuffix(q, by) {
		q = strings.TrimSuffix(q, by) + " GROUP BY kind, status"
	}
	return q, args
}
