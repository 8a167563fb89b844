package mysqlstore

import (
	"context"

	"github.com/rotahq/rota/internal/store"
)

// Check verifies the invariants that tie the tables together and returns
// every violation found (nil when the database is consistent): the shared
// ones (store.TaskInvariants, over the view runs) and this store's own.
func (s *Store) Check(ctx context.Context) error {
	checks := append(store.TaskInvariants(), []store.Invariant{
		{What: "terminal task not marked done or without end time", Query: `SELECT id FROM tasks WHERE status IN
			('SUCCESS','FAILED','TIMEOUT','CANCELED','SKIPPED') AND (done = 0 OR end_time = 0) LIMIT 5`},
		{What: "unfinished task marked done", Query: `SELECT id FROM tasks WHERE status IN ('WAITING','SCHEDULED','RUNNING') AND done = 1 LIMIT 5`},
		{What: "run of a missing task", Query: `SELECT r.id FROM run_history r LEFT JOIN tasks t ON t.id = r.task_id WHERE t.id IS NULL LIMIT 5`},
		{What: "run marked live but not RUNNING (or the reverse)", Query: `SELECT id FROM tasks
			WHERE (run_live = 1) <> (run_status = 'RUNNING') OR run_live IS NULL AND run_status = 'RUNNING' LIMIT 5`},
		{What: "task of several workers holding a run in its row", Query: `SELECT id FROM tasks WHERE workers > 1 AND run_id <> '' LIMIT 5`},
	}...)
	return store.CheckInvariants(checks, func(q string) ([]string, error) {
		rows, err := s.r.QueryContext(ctx, q)
		return strings1(rows, err, "check")
	})
}
