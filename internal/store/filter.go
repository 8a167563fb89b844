package store

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/rotahq/rota"
)

// TaskMatches reports whether task t passes p's filters (with its
// statuses when withStatus; Cursor and Limit aside), for backends that
// filter records as they read them instead of in a query (Redis). ranBy
// lists the workers that ran t; t.DependsOn its dependencies. It is the
// rule taskFilter writes in SQL.
func TaskMatches(p TaskListParams, t *rota.Task, ranBy []string, withStatus bool) bool {
	switch {
	case p.Kind != "" && t.Kind != p.Kind,
		withStatus && p.Status != "" && t.Status != p.Status,
		withStatus && len(p.Statuses) > 0 && !slices.Contains(p.Statuses, t.Status),
		p.Key != "" && t.Key != p.Key,
		p.Priority != "" && t.Priority != p.Priority,
		p.WorkerID != "" && !slices.Contains(ranBy, p.WorkerID),
		p.DependsOn != "" && !slices.Contains(t.DependsOn, p.DependsOn),
		p.ScheduleID != "" && t.ScheduleID != p.ScheduleID,
		!inRange(t.CreatedAt, p.CreatedAfter, p.CreatedBefore),
		!inRange(t.RunAt, p.RunAfter, p.RunBefore),
		(!p.FinishedAfter.IsZero() || !p.FinishedBefore.IsZero()) &&
			(t.EndTime.IsZero() || !inRange(t.EndTime, p.FinishedAfter, p.FinishedBefore)):
		return false
	case p.Search == "":
		return true
	}
	q := strings.ToLower(p.Search)
	return t.ID == q || strings.Contains(strings.ToLower(t.Key), q) || strings.Contains(strings.ToLower(t.Message), q)
}

// inRange: v (at the stored precision) is at or after after and before
// before; a zero bound is open.
func inRange(v, after, before time.Time) bool {
	ms := Millis(v)
	return (after.IsZero() || ms >= after.UnixMilli()) && (before.IsZero() || ms < before.UnixMilli())
}

// SortTasks orders tasks as p's sort does (then by id in the same
// direction) and keeps those after p's cursor, for backends that sort
// records as they read them (Redis); a cursor that does not parse keeps
// none.
func SortTasks(p TaskListParams, tasks []rota.Task) []rota.Task {
	key := func(t *rota.Task) int64 { return p.Sort.sortValue(t) }
	slices.SortFunc(tasks, func(a, b rota.Task) int {
		c := cmp.Compare(key(&a), key(&b))
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if !p.Sort.Asc {
			c = -c
		}
		return c
	})
	if p.Cursor == "" {
		return tasks
	}
	v, id, err := ParseSortCursor(p.Cursor)
	if err != nil {
		return nil
	}
	out := tasks[:0]
	for _, t := range tasks {
		tv := key(&t)
		after := tv < v || (tv == v && t.ID < id)
		if p.Sort.Asc {
			after = tv > v || (tv == v && t.ID > id)
		}
		if after {
			out = append(out, t)
		}
	}
	return out
}
