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
// are planned again with its real size; and that a table analyzed since
// is left alone.
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
	// Analyzed: a pass now leaves it alone (it changed by nothing since).
	due, err := pgstore.AnalyzeYoung(st, t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(due, "tasks") {
		t.Fatalf("analyzed tasks again with no change since: %v", due)
	}
}
