package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storetest"
)

// preparedState is what the pool's idle connections have prepared: by
// backend pid, for each warm statement, its generic plans so far (-1: not
// prepared); and the number of statements prepared twice on a connection
// (by the warm-up and by pgx's cache).
func preparedState(t *testing.T, st *pgstore.Store) (plans map[uint32][]int64, twice int) {
	t.Helper()
	ctx := t.Context()
	conns := pgstore.Pool(st).AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	plans = map[uint32][]int64{}
	for _, c := range conns {
		got := make([]int64, len(pgstore.WarmSQL))
		for i, sql := range pgstore.WarmSQL {
			got[i] = -1
			if err := c.QueryRow(ctx, `SELECT COALESCE(max(generic_plans), -1) FROM pg_prepared_statements WHERE statement = $1`,
				sql).Scan(&got[i]); err != nil {
				t.Fatal(err)
			}
		}
		plans[c.Conn().PgConn().PID()] = got
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM (SELECT statement FROM pg_prepared_statements
			GROUP BY statement HAVING count(*) > 1) AS d`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		twice += n
	}
	return plans, twice
}

// TestWarmConns: a store with WarmConns opens its whole pool with the hot
// statements prepared before any request, and planned only once the tasks
// table is large enough for plans worth keeping (a new schema's would scan
// it); the hot paths run those statements (none is prepared a second
// time); once the table grew and the analyzer analyzed it, the idle
// connections are planned; and a store opened on that schema comes with
// its connections planned.
func TestWarmConns(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	open := func() *pgstore.Store {
		st, err := pgstore.New(ctx, pgstore.Config{URL: testURL(), Schema: schema, NodeID: "n", WarmConns: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	// warm waits until every connection of st's full pool has every warm
	// statement prepared with at least minPlans generic plans, and
	// returns the plans.
	warm := func(st *pgstore.Store, minPlans int64) map[uint32][]int64 {
		pool := pgstore.Pool(st)
		var plans map[uint32][]int64
		deadline := time.Now().Add(20 * time.Second)
		for {
			if pool.Stat().IdleConns() == pool.Config().MaxConns {
				plans, _ = preparedState(t, st)
				ok := len(plans) == int(pool.Config().MaxConns)
				for _, c := range plans {
					for _, n := range c {
						ok = ok && n >= minPlans
					}
				}
				if ok {
					return plans
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("pool not warm within 20 s: %d of %d connections, plans %v (want ≥ %d each)",
					pool.Stat().TotalConns(), pool.Config().MaxConns, plans, minPlans)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	st := open()
	for pid, c := range warm(st, 0) {
		for i, n := range c {
			if n != 0 {
				t.Fatalf("connection %d planned warm statement %d on an empty table (%d generic plans)", pid, i, n)
			}
		}
	}

	// The hot paths: submits (single, batch), claims, reports.
	f := storetest.NewFixture(t, st)
	ps := make([]store.TaskInsertParams, 1000)
	for i := range ps {
		ps[i] = f.Params("k", f.At(0))
	}
	if _, err := st.TaskInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TaskInsert(ctx, f.Params("k", f.At(0))); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		res := f.Claim("w1", f.At(time.Second), 2, "k")
		for _, r := range res.Runs {
			f.Complete(store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: f.At(2 * time.Second)})
		}
	}
	if _, twice := preparedState(t, st); twice != 0 {
		t.Fatalf("%d statements prepared twice on the pool's connections: the hot paths did not run the warm ones", twice)
	}

	// The analyzer analyzes the grown table and plans the idle
	// connections' statements.
	warm(st, 1)

	// A store opened on a schema with an analyzed table of 1,001 tasks.
	warm(open(), 1)
}
