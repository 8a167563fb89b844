package pgstore_test

import (
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestMigrateKeyHeld checks the migration to keys held by finished tasks
// on data of the schema before it, where finished tasks had freed their
// key: of the tasks sharing a kind and key, the unfinished one holds it,
// or else the newest; all keep their key for listing.
func TestMigrateKeyHeld(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	st := openSchema(t, schema, "n1")
	st.Close()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Back to the schema before the migration, with the tasks it allowed
	// (and without the later migrations, 0006_schedule_ext, 0007_events and 0008_deps).
	_, err = conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()+`;
		DROP TRIGGER tasks_deps_settle ON tasks;
		DROP TRIGGER tasks_deps_deleted ON tasks;
		DROP FUNCTION tasks_deps_settle(), tasks_deps_deleted();
		DROP TABLE task_deps;
		ALTER TABLE tasks DROP COLUMN deps_waiting;
		DROP TABLE events, event_seq;
		ALTER TABLE schedules DROP COLUMN options, DROP COLUMN ext_state, DROP COLUMN error_message;
		DROP INDEX tasks_held_key;
		ALTER TABLE tasks DROP COLUMN key_held;
		CREATE UNIQUE INDEX tasks_open_key ON tasks (kind, key) WHERE key IS NOT NULL AND NOT done;
		INSERT INTO kinds (name) VALUES ('k');
		INSERT INTO tasks (id, kind, level, payload, key, status, avail, max_retries, workers, timeout_s,
			hb_timeout_s, created_at, run_at, end_time, updated_at) VALUES
			('t1', 'k', 1, '{}', 'a', 'SUCCESS',   false, 3, 1, 0, 30, 1000, 1000, 1500, 1500),
			('t2', 'k', 1, '{}', 'a', 'SCHEDULED', true,  3, 1, 0, 30, 2000, 2000, 0,    2000),
			('t3', 'k', 1, '{}', 'a', 'FAILED',    false, 3, 1, 0, 30, 3000, 3000, 3500, 3500),
			('u1', 'k', 1, '{}', 'b', 'SUCCESS',   false, 3, 1, 0, 30, 1000, 1000, 1500, 1500),
			('u2', 'k', 1, '{}', 'b', 'CANCELED',  false, 3, 1, 0, 30, 2000, 2000, 2500, 2500);
		DELETE FROM rota_migration WHERE version >= `+strconv.Itoa(pgstore.SchemaVersion()-3))
	if err != nil {
		t.Fatal(err)
	}
	st = openSchema(t, schema, "n1")
	storetest.WantKeysHeldAfterMigration(t, st)
}
