package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/rotahq/rota"
)

// WorkerListParams filters and pages WorkerListPage.
type WorkerListParams struct {
	Status rota.WorkerStatus // "" = any; else the status at Now
	Kind   string            // "" = any; else workers that claim this kind
	Cursor string            // id of the last worker of the previous page; "" = first page
	Limit  int               // 1..1000 (default 100)
	Now    time.Time         // the instant statuses are computed at
}

// WorkerListResult is one page of workers, by id.
type WorkerListResult struct {
	Workers    []rota.Worker
	NextCursor string // "" on the last page
}

// WorkerPruneParams selects the workers WorkerPrune deletes.
type WorkerPruneParams struct {
	// SeenBefore: workers whose last sighting (LastSeen plus the long-poll
	// wait of their last claim) is before it, and that hold no running
	// run, are deleted.
	SeenBefore time.Time
	Limit      int // at most this many (default 1000)
}

// MaxWorkerKinds bounds the kinds a worker record keeps: the kinds of
// its claims accumulate up to this many; past it, the record keeps the
// kinds of the latest claim only.
const MaxWorkerKinds = 100

// DefaultWorkerListLimit is the page size of a WorkerListPage without
// Limit.
const DefaultWorkerListLimit = 100

// WorkerListQuery builds the statement of a WorkerListPage for a backend
// whose placeholders placeholder(n) writes (n from 1) and whose columns
// start with cols (the worker columns read from table alias w, the
// running count last). kindCond(ph) is the backend's condition "w.kinds
// holds the kind ph". Status is computed in SQL as WorkerStatusAt does.
// It returns the statement, its arguments and the page size; the
// statement reads up to limit+1 rows.
func WorkerListQuery(p WorkerListParams, cols string, placeholder func(n int) string, kindCond func(ph string) string, truth string) (query string, args []any, limit int) {
	var where []string
	arg := func(v any) string {
		args = append(args, v)
		return placeholder(len(args))
	}
	if p.Cursor != "" {
		where = append(where, "w.id > "+arg(p.Cursor))
	}
	if p.Kind != "" {
		where = append(where, kindCond(arg(p.Kind)))
	}
	running := `(SELECT count(*) FROM runs r WHERE r.worker_id = w.id AND r.status = 'RUNNING')`
	stopped := fmt.Sprintf(`((w.stop_requested = %s OR w.deregistered = %s) AND %s = 0)`, truth, truth, running)
	if p.Status != "" {
		lost := func() string {
			return fmt.Sprintf(`CAST(%s AS BIGINT) > w.last_seen + w.last_wait_ms + %d`, arg(p.Now.UnixMilli()), WorkerLiveness.Milliseconds())
		}
		switch p.Status {
		case rota.WorkerStopped:
			where = append(where, stopped)
		case rota.WorkerLost:
			where = append(where, "NOT "+stopped+" AND "+lost())
		case rota.WorkerActive:
			where = append(where, "NOT "+stopped+" AND NOT ("+lost()+")")
		default:
			where = append(where, "1 = 0")
		}
	}
	limit = p.Limit
	if limit <= 0 {
		limit = DefaultWorkerListLimit
	}
	query = `SELECT ` + cols + ` FROM workers w`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY w.id LIMIT " + arg(limit+1)
	return query, args, limit
}

// WorkerListPage makes the page of a WorkerListPage from the rows its
// WorkerListQuery read (up to limit+1, by id).
func WorkerListPage(ws []rota.Worker, limit int) WorkerListResult {
	res := WorkerListResult{Workers: ws}
	if len(ws) > limit {
		res.Workers = ws[:limit]
		res.NextCursor = res.Workers[limit-1].ID
	}
	return res
}
