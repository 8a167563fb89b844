package pgstore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestYoungTablesAreAnalyzed fills a new schema's tasks table and checks
// that the store analyzes it by itself within seconds (autovacuum would
// take up to a minute), so that the statements planned while it was empty
// are planned again with its real size; that a table analyzed since is
// left alone, even when every row of it changed (ANALYZE makes every
// connection plan its statements again); and that it is analyzed again
// once it has grown fourfold or more.
func TestYoungTablesAreAnalyzed(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	st := openSchema(t, schema, "n")
	f := storetest.NewFixture(t, st)
	const n = 3000
	ps := make([]store.TaskInsertParams, n)
	for i := range ps {
		ps[i] = f.Params("k", f.At(time.Duration(i)*time.Millisecond))
	}
	if _, err := st.TaskInsertMany(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	reltuples := func() float32 {
		var v float32
		if err := conn.QueryRow(t.Context(), `SELECT c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = 'tasks'`, schema).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	deadline := time.Now().Add(20 * time.Second)
	for reltuples() < n {
		if time.Now().After(deadline) {
			t.Fatalf("tasks not analyzed within 20 s of %d inserts: reltuples %v", n, reltuples())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Analyzed: a pass now leaves it alone, although every row changed
	// since (counted once this connection's statistics are flushed).
	for _, q := range []string{`SET search_path = ` + pgx.Identifier{schema}.Sanitize(),
		`UPDATE tasks SET payload = payload`, `UPDATE tasks SET payload = payload`, `SELECT pg_stat_force_next_flush()`, `SELECT 1`} {
		if _, err := conn.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	due, err := pgstore.AnalyzeYoung(st, t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(due, "tasks") {
		t.Fatalf("analyzed tasks again after updates that did not grow it: %v", due)
	}
	// Grown fivefold: analyzed again (the inserting connections report
	// their rows to PostgreSQL's statistics up to ~10 s later when idle).
	deadline = time.Now().Add(30 * time.Second)
	for range 4 {
		for i := range ps {
			ps[i] = f.Params("k", f.At(time.Duration(i)*time.Millisecond))
		}
		if _, err := st.TaskInsertMany(t.Context(), ps); err != nil {
			t.Fatal(err)
		}
	}
	for reltuples() < 5*n {
		if time.Now().After(deadline) {
			t.Fatalf("tasks not analyzed within 30 s of growing to %d rows: reltuples %v", 5*n, reltuples())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
