package mysqlstore

import (
	"context"

	"github.com/rotahq/rota/internal/store"
)

// TaskHistory implements store.Store.
func (s *Store) TaskHistory(ctx context.Context, p store.HistoryParams) ([]store.HistoryBucket, error) {
	q, args := store.TaskHistoryQuery(p, store.HistoryDialect{Placeholder: func(int) string { return "?" }, IntDiv: "DIV", Int64: "SIGNED"})
	rows, err := s.r.QueryContext(ctx, q, args...)
	hs, err := collect(rows, err, "task history", func(sc scanner) (store.HistoryRow, error) {
		var r store.HistoryRow
		err := sc.Scan(r.Dest()...)
		return r, err
	})
	if err != nil {
		return nil, unavailable(err)
	}
	out := store.NewHistory(p)
	for _, r := range hs {
		store.HistoryAdd(out, r)
	}
	return out, nil
}

// TaskDeleteFinished implements store.Store: the finished tasks among
// ids, locked, then their run history, links and rows, as TaskCleanup
// deletes.
func (s *Store) TaskDeleteFinished(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	deleted := 0
	err := s.tx(ctx, "delete tasks", func(t *txn) error {
		rows, err := t.QueryContext(t.ctx, `SELECT id FROM tasks WHERE done = 1 AND id IN (`+inList(len(ids))+`) FOR UPDATE`, anyList(ids)...)
		done, err := strings1(rows, err, "finished tasks")
		if err != nil || len(done) == 0 {
			deleted = 0
			return err
		}
		deleted = len(done)
		return deleteTasks(t, done, "delete tasks")
	})
	return deleted, err
}

// deleteTasks deletes the tasks ids (locked by the caller) with their run
// history and dependency links.
func deleteTasks(t *txn, ids []string, what string) error {
	args, in := anyList(ids), inList(len(ids))
	for _, q := range []string{
		`DELETE FROM run_history WHERE task_id IN (` + in + `)`,
		`DELETE FROM task_deps WHERE task_id IN (` + in + `)`,
		`DELETE FROM task_deps WHERE dep_id IN (` + in + `)`,
		`DELETE FROM tasks WHERE id IN (` + in + `)`,
	} {
		if _, err := t.exec(q, args...); err != nil {
			return wrap(what, err)
		}
	}
	return nil
}
