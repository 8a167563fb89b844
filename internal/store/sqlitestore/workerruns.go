package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"
)

// WorkerRunsActive implements store.Store.
func (s *Store) WorkerRunsActive(ctx context.Context, workerIDs []string) (map[string][]rota.WorkerRun, error) {
	out := map[string][]rota.WorkerRun{}
	if len(workerIDs) == 0 {
		return out, nil
	}
	args := make([]any, len(workerIDs))
	for i, id := range workerIDs {
		args[i] = id
	}
	q := store.WorkerRunsSelect + `IN (?` + strings.Repeat(",?", len(workerIDs)-1) + `)` + store.WorkerRunsOrder
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: worker runs: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		if err := store.ScanWorkerRun(rows, out); err != nil {
			return nil, fmt.Errorf("sqlitestore: worker runs: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: worker runs: %w", err))
	}
	return out, nil
}

// pinnedWaitingQuery groups the pinned tasks claimable at ?1 by kind and
// worker ids (at most ?2 groups). tasks_pinned_waiting (0014) holds just
// the available pinned tasks, in group order: the read is proportional
// to them, not to the table.
const pinnedWaitingQuery = `SELECT kind, worker_ids, MIN(run_at) FROM tasks INDEXED BY tasks_pinned_waiting
		WHERE avail = 1 AND status = 'SCHEDULED' AND pinned = 1 AND run_at <= ?
		GROUP BY kind, worker_ids ORDER BY kind LIMIT ?`

// TaskPinnedWaiting implements store.Store.
func (s *Store) TaskPinnedWaiting(ctx context.Context, now time.Time) ([]store.PinnedWaiting, error) {
	rows, err := s.r.QueryContext(ctx, pinnedWaitingQuery, ms(now), store.MaxPinnedGroups)
	if err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: pinned waiting: %w", err))
	}
	defer rows.Close()
	var out []store.PinnedWaiting
	for rows.Next() {
		var (
			g      store.PinnedWaiting
			ids    sql.NullString
			oldest int64
		)
		if err := rows.Scan(&g.Kind, &ids, &oldest); err != nil {
			return nil, fmt.Errorf("sqlitestore: pinned waiting: %w", err)
		}
		if ids.Valid {
			if err := json.Unmarshal([]byte(ids.String), &g.WorkerIDs); err != nil {
				return nil, fmt.Errorf("sqlitestore: pinned waiting: worker ids: %w", err)
			}
		}
		g.Oldest = store.FromMillis(oldest)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: pinned waiting: %w", err))
	}
	return store.MergePinned(out), nil
}

// TaskCountByStatus implements store.Store.
func (s *Store) TaskCountByStatus(ctx context.Context, p store.TaskListParams) (map[rota.Status]int, error) {
	q, args, err := countQuery(p)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: count tasks: %w", err))
	}
	defer rows.Close()
	out := map[rota.Status]int{}
	for rows.Next() {
		var (
			status string
			n      int
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("sqlitestore: count tasks: %w", err)
		}
		out[rota.Status(status)] += n // a row per kind, status and set of rows: see countQuery
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: count tasks: %w", err))
	}
	return out, nil
}
