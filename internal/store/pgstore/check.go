package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store"
)

// Check verifies the invariants that tie the tables together and returns
// every violation found (nil when the store is consistent), like
// sqlitestore's Check:
//   - a task's running counter equals its RUNNING runs, its successes its
//     SUCCESS runs, its holders the workers of both;
//   - a terminal task is done and has an end time; an unfinished one is
//     not done;
//   - a task is available exactly when it is unfinished, not stopped, not
//     held (a schedule's queued run) and has room for a run;
//   - a RUNNING task has running runs;
//   - an unfinished held task is a SCHEDULED run of a schedule; a SKIPPED
//     task is a run of a schedule with a skip reason;
//   - no schedule has a revision past the store's.
//
// It reads the whole tasks table: a tool for tests and crash checks, not
// for a busy production database.
func (s *Store) Check(ctx context.Context) error {
	checks := append(store.TaskInvariants(), []store.Invariant{
		{What: "task holders differ from the workers of its RUNNING and SUCCESS runs", Query: `SELECT t.id FROM tasks t
			WHERE ARRAY(SELECT unnest(t.holders) ORDER BY 1) <> ARRAY(SELECT r.worker_id FROM runs r
				WHERE r.task_id = t.id AND r.status IN ('RUNNING', 'SUCCESS') ORDER BY 1) LIMIT 5`},
		{What: "terminal task without end time", Query: `SELECT id FROM tasks WHERE done AND end_time = 0 LIMIT 5`},
		{What: "task available when it should not be, or the reverse", Query: `SELECT id FROM tasks
			WHERE avail <> (NOT done AND NOT stop_requested AND NOT held AND deps_waiting = 0 AND running + successes < workers) LIMIT 5`},
		{What: "held task that is not a waiting run of a schedule", Query: `SELECT id FROM tasks
			WHERE held AND NOT done AND (status <> 'SCHEDULED' OR schedule_id = '') LIMIT 5`},
		{What: "SKIPPED task without schedule or reason", Query: `SELECT id FROM tasks
			WHERE status = 'SKIPPED' AND (schedule_id = '' OR skip_reason = '') LIMIT 5`},
		{What: "schedule revision past the store's", Query: `SELECT id FROM schedules
			WHERE rev > (SELECT rev FROM schedule_rev WHERE id = 1) LIMIT 5`},
	}...)
	return store.CheckInvariants(checks, func(q string) ([]string, error) {
		rows, err := s.pool.Query(ctx, q)
		if err != nil {
			return nil, s.translate("check", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		return ids, s.translate("check", err)
	})
}
