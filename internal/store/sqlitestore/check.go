package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/rotahq/rota/internal/store"
)

// Check verifies the invariants that tie the tables together and returns
// every violation found (nil when the database is consistent):
//   - a task's running counter equals its RUNNING runs, its successes its
//     SUCCESS runs;
//   - a terminal task is marked done and has an end time; an unfinished one
//     is not done;
//   - every run of run_log belongs to an existing task; only single-worker
//     tasks keep a run in their row; a row holds a lease exactly while the
//     run it holds runs, and then its task is RUNNING;
//   - a task with dependents counts them (the dependency triggers watch
//     only tasks that do);
//   - SQLite's own integrity check passes.
//
// The crash tests run it after kill -9.
func (s *Store) Check(ctx context.Context) error {
	checks := append(store.TaskInvariants(), []store.Invariant{
		{What: "terminal task not marked done or without end time", Query: `SELECT id FROM tasks WHERE status IN
			('SUCCESS','FAILED','TIMEOUT','CANCELED','SKIPPED') AND (done = 0 OR end_time = 0) LIMIT 5`},
		{What: "unfinished task marked done", Query: `SELECT id FROM tasks WHERE status IN ('WAITING','SCHEDULED','RUNNING') AND done = 1 LIMIT 5`},
		{What: "run of a missing task", Query: `SELECT r.id FROM run_log r LEFT JOIN tasks t ON t.id = r.task_id WHERE t.id IS NULL LIMIT 5`},
		// tasks_kind_status holds the rows without a lease, tasks_running
		// those whose run runs: each row must be in exactly one of them
		// (see rowSet).
		{What: "run running in its task's row without a lease", Query: `SELECT id FROM tasks WHERE run_status = 'RUNNING' AND run_lease = 0 LIMIT 5`},
		{What: "lease in the row of a task whose run does not run", Query: `SELECT id FROM tasks WHERE run_lease <> 0 AND run_status <> 'RUNNING' LIMIT 5`},
		{What: "run running in the row of a task not RUNNING", Query: `SELECT id FROM tasks WHERE run_status = 'RUNNING' AND status <> 'RUNNING' LIMIT 5`},
		{What: "run kept in the row of a multi-worker task", Query: `SELECT id FROM tasks WHERE workers > 1 AND run_status <> '' LIMIT 5`},
		{What: "task with dependents not counting them (its dependency triggers would not fire)", Query: `SELECT DISTINCT d.dep_id
			FROM task_deps d JOIN tasks t ON t.id = d.dep_id WHERE t.dependents = 0 LIMIT 5`},
	}...)
	err := store.CheckInvariants(checks, func(q string) ([]string, error) {
		rows, err := s.r.QueryContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: %w", err)
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
	})
	errs := []error{err}
	var res string
	if err := s.r.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return fmt.Errorf("sqlitestore: integrity check: %w", err)
	}
	if res != "ok" {
		errs = append(errs, fmt.Errorf("sqlite integrity check: %s", res))
	}
	return errors.Join(errs...)
}
