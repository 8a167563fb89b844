package pgstore_test

import (
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
	// The schema before the migration (0005_key_held), with the tasks it
	// allowed.
	if err := pgstore.MigrateTo(ctx, testURL(), schema, 4); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SET search_path TO `+pgx.Identifier{schema}.Sanitize()+`;
		INSERT INTO kinds (name) VALUES ('k');
		INSERT INTO tasks (id, kind, level, payload, key, status, avail, max_retries, workers, timeout_s,
			hb_timeout_s, created_at, run_at, end_time, updated_at) VALUES
			('t1', 'k', 1, '{}', 'a', 'SUCCESS',   false, 3, 1, 0, 30, 1000, 1000, 1500, 1500),
			('t2', 'k', 1, '{}', 'a', 'SCHEDULED', true,  3, 1, 0, 30, 2000, 2000, 0,    2000),
			('t3', 'k', 1, '{}', 'a', 'FAILED',    false, 3, 1, 0, 30, 3000, 3000, 3500, 3500),
			('u1', 'k', 1, '{}', 'b', 'SUCCESS',   false, 3, 1, 0, 30, 1000, 1000, 1500, 1500),
			('u2', 'k', 1, '{}', 'b', 'CANCELED',  false, 3, 1, 0, 30, 2000, 2000, 2500, 2500)`)
	if err != nil {
		t.Fatal(err)
	}
	st := openSchema(t, schema, "n1")
	storetest.WantKeysHeldAfterMigration(t, st)
}
