package sqlitestore

import (
	"context"
	"fmt"
	"strings"

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
	q := `SELECT worker_id, id, task_id, kind, start_time FROM runs
		WHERE status = 'RUNNING' AND worker_id IN (?` + strings.Repeat(",?", len(workerIDs)-1) + `)
		ORDER BY worker_id, start_time, id`
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: worker runs: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			worker string
			r      rota.WorkerRun
			start  int64
		)
		if err := rows.Scan(&worker, &r.RunID, &r.TaskID, &r.Kind, &start); err != nil {
			return nil, fmt.Errorf("sqlitestore: worker runs: %w", err)
		}
		r.StartedAt = store.FromMillis(start)
		out[worker] = append(out[worker], r)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: worker runs: %w", err))
	}
	return out, nil
}
