package sqlitestore

import (
	"context"
	"database/sql"
	"strconv"
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

// UndoLeanForTest takes a database of the current schema back to the one
// before 0011_lean (run_log the table runs again, no run in task rows,
// the dependency triggers ungated); the schema version is the caller's.
const UndoLeanForTest = `
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
	CREATE INDEX tasks_kind_status ON tasks (kind, status);
	CREATE TRIGGER tasks_deps_succeeded AFTER UPDATE OF status ON tasks
	WHEN new.status = 'SUCCESS' AND old.status <> 'SUCCESS'
	BEGIN
		UPDATE tasks SET deps_waiting = deps_waiting - 1,
			status = CASE WHEN deps_waiting = 1 THEN 'SCHEDULED' ELSE status END,
			avail = CASE WHEN deps_waiting = 1 THEN 1 ELSE 0 END,
			updated_at = new.updated_at
		WHERE id IN (SELECT task_id FROM task_deps WHERE dep_id = new.id) AND status = 'WAITING';
	END;
	CREATE TRIGGER tasks_deps_failed AFTER UPDATE OF status ON tasks
	WHEN new.status IN ('FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED') AND old.status NOT IN ('SUCCESS', 'FAILED', 'TIMEOUT', 'CANCELED', 'SKIPPED')
	BEGIN
		UPDATE tasks SET status = 'CANCELED', done = 1, avail = 0, end_time = new.end_time,
			message = 'dependency_failed: task ' || new.id || ' ended ' || new.status,
			updated_at = new.updated_at
		WHERE id IN (SELECT task_id FROM task_deps WHERE dep_id = new.id) AND status = 'WAITING';
	END;
	CREATE TRIGGER tasks_deps_deleted AFTER DELETE ON tasks
	BEGIN
		DELETE FROM task_deps WHERE task_id = old.id;
		DELETE FROM task_deps WHERE dep_id = old.id;
	END;`

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
