package pgstore

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotahq/rota/internal/store"
)

// TaskHistory implements store.Store.
func (s *Store) TaskHistory(ctx context.Context, p store.HistoryParams) ([]store.HistoryBucket, error) {
	q, args := store.TaskHistoryQuery(p, store.HistoryDialect{
		Placeholder: func(n int) string { return "$" + strconv.Itoa(n) + "::bigint" }, IntDiv: "/", Int64: "BIGINT"})
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, s.translate("task history", err)
	}
	out := store.NewHistory(p)
	var r store.HistoryRow
	if _, err := pgx.ForEachRow(rows, r.Dest(), func() error {
		store.HistoryAdd(out, r)
		return nil
	}); err != nil {
		return nil, s.translate("task history", err)
	}
	return out, nil
}

// TaskDeleteFinished implements store.Store: runs go with their task
// (ON DELETE CASCADE), links through the deps trigger.
func (s *Store) TaskDeleteFinished(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var deleted int
	err := s.tx(ctx, "delete tasks", func(t *txn) error {
		t.queue(`DELETE FROM tasks WHERE done AND id = ANY ($1)`, ids).Exec(func(ct pgconn.CommandTag) error {
			deleted = int(ct.RowsAffected())
			return nil
		})
		return nil
	})
	return deleted, err
}
