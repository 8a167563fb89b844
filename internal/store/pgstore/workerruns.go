package pgstore

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// WorkerRunsActive implements store.Store.
func (s *Store) WorkerRunsActive(ctx context.Context, workerIDs []string) (map[string][]rota.WorkerRun, error) {
	out := map[string][]rota.WorkerRun{}
	if len(workerIDs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, store.WorkerRunsSelect+`= ANY($1)`+store.WorkerRunsOrder, workerIDs)
	if err != nil {
		return nil, s.translate("worker runs", err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := store.ScanWorkerRun(rows, out); err != nil {
			return nil, s.translate("worker runs", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, s.translate("worker runs", err)
	}
	return out, nil
}

// pinnedWaitingSQL groups the pinned tasks waiting at $1 by kind and
// worker ids (at most $2 groups), reading tasks_pinned_waiting (migration
// 0013).
const pinnedWaitingSQL = `SELECT kind, worker_ids, min(run_at) FROM tasks
		WHERE avail AND status = 'SCHEDULED' AND pinned AND run_at <= $1
		GROUP BY kind, worker_ids ORDER BY kind LIMIT $2`

// TaskPinnedWaiting implements store.Store.
func (s *Store) TaskPinnedWaiting(ctx context.Context, now time.Time) ([]store.PinnedWaiting, error) {
	rows, err := s.pool.Query(ctx, pinnedWaitingSQL, ms(now), store.MaxPinnedGroups)
	if err != nil {
		return nil, s.translate("pinned waiting", err)
	}
	var (
		out    []store.PinnedWaiting
		g      store.PinnedWaiting
		oldest int64
	)
	_, err = pgx.ForEachRow(rows, []any{&g.Kind, &g.WorkerIDs, &oldest}, func() error {
		g.Oldest = store.FromMillis(oldest)
		out = append(out, g)
		g.WorkerIDs = nil
		return nil
	})
	if err != nil {
		return nil, s.translate("pinned waiting", err)
	}
	return store.MergePinned(out), nil
}

// TaskCountByStatus implements store.Store.
func (s *Store) TaskCountByStatus(ctx context.Context, p store.TaskListParams) (map[rota.Status]int, error) {
	q, args := store.TaskCountQuery(p, func(n int) string { return "$" + strconv.Itoa(n) })
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.translate("count tasks", err)
	}
	out := map[rota.Status]int{}
	var (
		status string
		n      int
	)
	_, err = pgx.ForEachRow(rows, []any{&status, &n}, func() error {
		out[rota.Status(status)] = n
		return nil
	})
	if err != nil {
		return nil, s.translate("count tasks", err)
	}
	return out, nil
}
