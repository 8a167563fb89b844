package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rotahq/rota/internal/store"
)

// TaskHistory implements store.Store.
func (s *Store) TaskHistory(ctx context.Context, p store.HistoryParams) ([]store.HistoryBucket, error) {
	q, args := store.TaskHistoryQuery(p, store.HistoryDialect{Placeholder: func(int) string { return "?" }, IntDiv: "/", Int64: "BIGINT"})
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: task history: %w", err))
	}
	defer rows.Close()
	out := store.NewHistory(p)
	for rows.Next() {
		var r store.HistoryRow
		if err := rows.Scan(r.Dest()...); err != nil {
			return nil, fmt.Errorf("sqlitestore: task history: %w", err)
		}
		store.HistoryAdd(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable(fmt.Errorf("sqlitestore: task history: %w", err))
	}
	return out, nil
}

// TaskDeleteFinished implements store.Store: the runs of the log (a
// task row holds its latest run), then the tasks
// (the deps trigger takes their links along), in one write.
func (s *Store) TaskDeleteFinished(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: delete tasks: %w", err)
	}
	var deleted int64
	err = s.write(ctx, func(ctx context.Context, tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_log WHERE task_id IN
			(SELECT id FROM tasks WHERE done = 1 AND id IN (SELECT value FROM json_each(?)))`, string(list)); err != nil {
			return fmt.Errorf("sqlitestore: delete runs: %w", err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE done = 1 AND id IN (SELECT value FROM json_each(?))`, string(list))
		if err != nil {
			return fmt.Errorf("sqlitestore: delete tasks: %w", err)
		}
		deleted, err = res.RowsAffected()
		return err
	})
	return int(deleted), err
}
