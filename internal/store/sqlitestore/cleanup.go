package sqlitestore

import (
	"context"
	"fmt"

	"github.com/rotahq/rota/internal/store"
)

// TaskCleanup implements store.Store.
func (s *Store) TaskCleanup(ctx context.Context, p store.TaskCleanupParams) (int, error) {
	now, limit := p.Now, p.Limit
	if limit <= 0 {
		limit = 1000
	}
	deleted := 0
	err := s.write(ctx, func(ctx context.Context, tx *wtx) error {
		deleted = 0
		if err := fence(ctx, tx, p.Term, now); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT name, retention_seconds FROM kinds WHERE retention_seconds > 0 ORDER BY name`)
		if err != nil {
			return fmt.Errorf("sqlitestore: kinds with retention: %w", err)
		}
		type kr struct {
			name string
			keep int64
		}
		var kinds []kr
		for rows.Next() {
			var k kr
			if err := rows.Scan(&k.name, &k.keep); err != nil {
				rows.Close()
				return err
			}
			kinds = append(kinds, k)
		}
		rows.Close()
		for _, k := range kinds {
			if deleted >= limit {
				break
			}
			cutoff := ms(now) - k.keep*1000
			ids, err := expiredTasks(ctx, tx, k.name, cutoff, limit-deleted)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := tx.ExecContext(ctx, `DELETE FROM run_log WHERE task_id = ?`, id); err != nil {
					return fmt.Errorf("sqlitestore: delete runs of %s: %w", id, err)
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE id = ?`, id); err != nil {
					return fmt.Errorf("sqlitestore: delete task %s: %w", id, err)
				}
			}
			deleted += len(ids)
		}
		return nil
	})
	return deleted, err
}

func expiredTasks(ctx context.Context, tx *wtx, kind string, cutoff int64, limit int) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM tasks WHERE done = 1 AND kind = ? AND end_time < ?
		ORDER BY end_time LIMIT ?`, kind, cutoff, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: expired tasks of %s: %w", kind, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
