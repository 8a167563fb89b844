package sqlitestore_test

import (
	"context"
	"testing"

	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestMigrateKeyHeld checks the migration to keys held by finished tasks
// on data of the schema before it, where finished tasks had freed their
// key: of the tasks sharing a kind and key, the unfinished one holds it,
// or else the newest; all keep their key for listing.
func TestMigrateKeyHeld(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := newDatabase(t)
	// Back to the schema before the migration, with the tasks it allowed
	// (and without the later migrations, 0008_schedule_ext, 0009_events
	// 0010_deps, 0011_lean, 0012_push, 0013_status_index and
	// 0014_pinned_waiting).
	err := sqlitestore.ExecForTest(ctx, path, undoIdleStatus+undoPinnedWaiting+undoStatusIndex+undoPush+sqlitestore.UndoLeanForTest()+`
		DROP TRIGGER tasks_deps_succeeded;
		DROP TRIGGER tasks_deps_failed;
		DROP TRIGGER tasks_deps_deleted;
		DROP TABLE task_deps;
		ALTER TABLE tasks DROP COLUMN deps_waiting;
		DROP TABLE events;
		DROP TABLE event_seq;
		ALTER TABLE schedules DROP COLUMN options;
		ALTER TABLE schedules DROP COLUMN ext_state;
		ALTER TABLE schedules DROP COLUMN error_message;
		DROP INDEX tasks_held_key;
		ALTER TABLE tasks DROP COLUMN key_held;
		CREATE UNIQUE INDEX tasks_open_key ON tasks (kind, key) WHERE key IS NOT NULL AND done = 0;
		INSERT INTO tasks (id, kind, level, payload, key, status, done, avail, max_retries, workers, timeout_s,
			hb_timeout_s, created_at, run_at, end_time, updated_at) VALUES
			('t1', 'k', 1, '{}', 'a', 'SUCCESS',   1, 0, 3, 1, 0, 30, 1000, 1000, 1500, 1500),
			('t2', 'k', 1, '{}', 'a', 'SCHEDULED', 0, 1, 3, 1, 0, 30, 2000, 2000, 0,    2000),
			('t3', 'k', 1, '{}', 'a', 'FAILED',    1, 0, 3, 1, 0, 30, 3000, 3000, 3500, 3500),
			('u1', 'k', 1, '{}', 'b', 'SUCCESS',   1, 0, 3, 1, 0, 30, 1000, 1000, 1500, 1500),
			('u2', 'k', 1, '{}', 'b', 'CANCELED',  1, 0, 3, 1, 0, 30, 2000, 2000, 2500, 2500);`)
	if err != nil {
		t.Fatal(err)
	}
	if err := sqlitestore.SetSchemaVersionForTest(ctx, path, sqlitestore.SchemaVersion()-9); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.New(ctx, sqlitestore.Config{Path: path})
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	defer st.Close()
	storetest.WantKeysHeldAfterMigration(t, st)
}

// undoPinnedWaiting takes a database back to the schema before
// 0014_pinned_waiting.
const undoPinnedWaiting = `
	DROP INDEX tasks_pinned_waiting;
`

// undoStatusIndex takes a database back to the schema before
// 0013_status_index.
const undoStatusIndex = `
	CREATE INDEX tasks_status_id ON tasks (status, id);
`

// undoPush takes a database back to the schema before 0012_push.
const undoPush = `
	DROP TABLE push_workers;
	ALTER TABLE kinds DROP COLUMN dispatch;
`
