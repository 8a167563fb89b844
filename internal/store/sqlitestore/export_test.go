package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/rotahq/rota/internal/store"
)

// SetSchemaVersionForTest overwrites the recorded schema version of the
// database at path.
func SetSchemaVersionForTest(ctx context.Context, path string, v int) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, `UPDATE rota_meta SET value = ? WHERE key = 'schema_version'`, strconv.Itoa(v))
	return err
}

// ExecForTest runs statements on the database at path, outside the store.
func ExecForTest(ctx context.Context, path, stmts string) error {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, stmts)
	return err
}

// UndoLeanForTest returns the statements that take a database of the
// current schema back to the one before 0011_lean (run_log the table runs
// again, no run in task rows, the dependency triggers of 0010_deps); the
// schema version is the caller's.
func UndoLeanForTest() string {
	deps, err := migrationFS.ReadFile("migrations/0010_deps.sql")
	if err != nil {
		panic(err)
	}
	triggers := string(deps[strings.Index(string(deps), "CREATE TRIGGER"):])
	return `
	DROP TRIGGER tasks_deps_succeeded;
	DROP TRIGGER tasks_deps_failed;
	DROP TRIGGER tasks_deps_deleted;
	DROP VIEW runs;
	ALTER TABLE run_log RENAME TO runs;
	DROP INDEX tasks_run;
	DROP INDEX tasks_running;
	ALTER TABLE tasks DROP COLUMN run_id;
	ALTER TABLE tasks DROP COLUMN run_worker;
	ALTER TABLE tasks DROP COLUMN run_status;
	ALTER TABLE tasks DROP COLUMN run_start;
	ALTER TABLE tasks DROP COLUMN run_end;
	ALTER TABLE tasks DROP COLUMN run_lease;
	ALTER TABLE tasks DROP COLUMN run_deadline;
	ALTER TABLE tasks DROP COLUMN run_stop;
	ALTER TABLE tasks DROP COLUMN run_message;
	ALTER TABLE tasks DROP COLUMN dependents;
	ALTER TABLE tasks DROP COLUMN parents;
	ALTER TABLE tasks DROP COLUMN dep_status;
	CREATE INDEX tasks_due ON tasks (kind, run_at) WHERE avail = 1;
	` + triggers
}

// HoldWriterForTest has the writer run a transaction that waits until the
// returned release is called: operations queue meanwhile, and then commit
// together in the writer's next transaction. The hold costs a BEGIN and a
// COMMIT.
func (s *Store) HoldWriterForTest() (release func()) {
	started, rel := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.write(context.Background(), func(context.Context, *wtx) error {
			close(started)
			<-rel
			return nil
		})
	}()
	<-started
	return func() { close(rel); <-done }
}

// QueuedForTest is the number of operations waiting for the writer.
func (s *Store) QueuedForTest() int { return len(s.ops) }

// CacheSizesForTest returns PRAGMA cache_size of the writer and of every
// connection of the read pool (negative: KiB), holding them all at once so
// that each is a different connection.
func (s *Store) CacheSizesForTest(ctx context.Context) (writer int, readers []int, err error) {
	if err := s.wdb.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&writer); err != nil {
		return 0, nil, err
	}
	for range s.cfg.ReadConns {
		c, err := s.rdb.Conn(ctx)
		if err != nil {
			return 0, nil, err
		}
		defer c.Close()
		var n int
		if err := c.QueryRowContext(ctx, `PRAGMA cache_size`).Scan(&n); err != nil {
			return 0, nil, err
		}
		readers = append(readers, n)
	}
	return writer, readers, nil
}

// CompletePlansForTest returns SQLite's plans (EXPLAIN QUERY PLAN
// details) of the statements of a group of reports: "find"
// (completeFind), "settle" (completeSettle), "settle each"
// (completeSettleEach), and "rows N"
// (completeSettleRows for each row count it is prepared with).
func (s *Store) CompletePlansForTest(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	var err error
	if out["find"], err = s.wplanForTest(ctx, completeFind, "{}"); err != nil {
		return nil, err
	}
	if out["settle"], err = s.wplanForTest(ctx, completeSettle, "[]", 0); err != nil {
		return nil, err
	}
	if out["settle each"], err = s.wplanForTest(ctx, completeSettleEach, "{}"); err != nil {
		return nil, err
	}
	for _, n := range completeSetRows {
		q, rows := completeSetQuery(n)
		if out[fmt.Sprintf("rows %d", rows)], err = s.wplanForTest(ctx, q, make([]any, rows*completeWidth)...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// wplanForTest is planForTest on the write connection.
func (s *Store) wplanForTest(ctx context.Context, q string, args ...any) ([]string, error) {
	return explainOn(ctx, s.wdb, q, args...)
}

// IndexesForTest returns the names of the indexes of table, in order.
func (s *Store) IndexesForTest(ctx context.Context, table string) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? ORDER BY name`, table)
	if err != nil {
		return nil, err
	}
	return collectRows(rows, "index", func(sc scanner) (*string, error) {
		var n string
		return &n, sc.Scan(&n)
	})
}

// ListPlansForTest returns SQLite's plan (EXPLAIN QUERY PLAN details) of
// each statement TaskList runs for p's page.
func (s *Store) ListPlansForTest(ctx context.Context, p store.TaskListParams) ([][]string, error) {
	parts, err := s.listParts(ctx, p)
	if err != nil {
		return nil, err
	}
	var out [][]string
	for _, part := range parts {
		stmt, args, _, err := listQuery(part)
		if err != nil {
			return nil, err
		}
		plan, err := s.planForTest(ctx, stmt, args...)
		if err != nil {
			return nil, err
		}
		out = append(out, plan)
	}
	return out, nil
}

// CountPlanForTest returns SQLite's plan (EXPLAIN QUERY PLAN details) of
// TaskCountByStatus's statement for p.
func (s *Store) CountPlanForTest(ctx context.Context, p store.TaskListParams) ([]string, error) {
	q, args, err := countQuery(p)
	if err != nil {
		return nil, err
	}
	return s.planForTest(ctx, q, args...)
}

// StatsPlanForTest returns SQLite's plan (EXPLAIN QUERY PLAN details) of
// Stats' count of the tasks.
func (s *Store) StatsPlanForTest(ctx context.Context) ([]string, error) {
	return s.planForTest(ctx, statsQuery)
}

// planForTest returns SQLite's plan (EXPLAIN QUERY PLAN details) of q.
func (s *Store) planForTest(ctx context.Context, q string, args ...any) ([]string, error) {
	return explainOn(ctx, s.rdb, q, args...)
}

// explainOn returns SQLite's plan (EXPLAIN QUERY PLAN details) of q on db.
func explainOn(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return nil, err
	}
	return collectRows(rows, "plan", func(sc scanner) (*string, error) {
		var id, parent, unused int
		var detail string
		return &detail, sc.Scan(&id, &parent, &unused, &detail)
	})
}

// PinnedWaitingPlanForTest returns SQLite's plan (EXPLAIN QUERY PLAN
// details) of TaskPinnedWaiting's query.
func (s *Store) PinnedWaitingPlanForTest(ctx context.Context) ([]string, error) {
	return s.planForTest(ctx, pinnedWaitingQuery, 0, 1)
}

// CompleteRowsForTest returns the rows of completeSettleRows for n
// reports (completeSetQuery).
func CompleteRowsForTest(n int) int {
	_, rows := completeSetQuery(n)
	return rows
}

// CandidatePlanForTest returns SQLite's plan (EXPLAIN QUERY PLAN details)
// of the claim's candidate query, PinnedOnly or not.
func (s *Store) CandidatePlanForTest(ctx context.Context, pinnedOnly bool) ([]string, error) {
	q := candidateQuery
	if pinnedOnly {
		q = pinnedCandidateQuery
	}
	return s.wplanForTest(ctx, q, "w", "k", 0, 1)
}

// IndexSQLForTest returns the CREATE INDEX statement of index name.
func (s *Store) IndexSQLForTest(ctx context.Context, name string) (string, error) {
	var q string
	err := s.rdb.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?`, name).Scan(&q)
	return q, err
}
