package pgstore

import (
	"context"

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
	rows, err := s.pool.Query(ctx, `SELECT worker_id, id, task_id, kind, start_time FROM runs
		WHERE status = 'RUNNING' AND worker_id = ANY($1)
		ORDER BY worker_id, start_time, id`, workerIDs)
	if err != nil {
		return nil, s.translate("worker runs", err)
	}
	var (
		worker string
		r      rota.WorkerRun
		start  int64
	)
	_, err = pgx.ForEachRow(rows, []any{&worker, &r.RunID, &r.TaskID, &r.Kind, &start}, func() error {
		r.StartedAt = store.FromMillis(start)
		out[worker] = append(out[worker], r)
		return nil
	})
	if err != nil {
		return nil, s.translate("worker runs", err)
	}
	return out, nil
}
