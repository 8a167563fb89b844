package store

import (
	"slices"
	"strings"

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
		p.DependsOn != "" && !slices.Contains(t.DependsOn, p.DependsOn):
		return false
	case p.Search == "":
		return true
	}
	q := strings.ToLower(p.Search)
	return t.ID == q || strings.Contains(strings.ToLower(t.Key), q) || strings.Contains(strings.ToLower(t.Message), q)
}
