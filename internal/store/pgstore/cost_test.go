package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store/pgstore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// openCounted opens a store on a fresh schema whose statements c counts.
func openCounted(tb testing.TB, c *storecost.Counter) *pgstore.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.New(ctx, pgstore.Config{URL: testURL(), Schema: newSchema(tb), NodeID: "n1", Cost: c})
	if err != nil {
		tb.Fatalf("pgstore.New: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// TestCostPerTask pins what each hot path asks of PostgreSQL, so that a
// change cannot add a statement or a round trip unnoticed.
func TestCostPerTask(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openCounted(t, &c)
	got := storetest.MeasureCost(t, st, &c)
	t.Logf("PostgreSQL:\n%s", storetest.CostTable(got))
	// Measured on the store as of issue 13's "before". A transaction is
	// pipelined (txn): BEGIN goes with the first batch and COMMIT with the
	// last, so a round trip is one batch; each COMMIT is one WAL flush.
	storetest.WantCost(t, got, map[string]storecost.Counts{
		// One batch: BEGIN; INSERT tasks; COMMIT.
		storetest.CostInsert: {Statements: 3, RoundTrips: 1, Commits: 1},
		// Batch 1: BEGIN; upsert workers; SELECT kinds FOR UPDATE; the pick
		// (candidatesSQL). Batch 2: one statement that inserts the runs
		// and updates the tasks (unnest); COMMIT.
		storetest.CostClaim: {Statements: 6, RoundTrips: 2, Commits: 1},
		// Batch 1: BEGIN; SELECT tasks FOR NO KEY UPDATE; SELECT runs.
		// Batch 2: UPDATE runs (lease); UPDATE workers (last_seen)
		// RETURNING stop_requested; COMMIT.
		storetest.CostHeartbeat: {Statements: 6, RoundTrips: 2, Commits: 1},
		// A report alone in its group. Batch 1: BEGIN; SELECT tasks FOR NO
		// KEY UPDATE; SELECT runs. Batch 2: UPDATE runs (SUCCESS); UPDATE
		// tasks (settled); SELECT tasks (the task returned); COMMIT.
		storetest.CostComplete: {Statements: 7, RoundTrips: 2, Commits: 1},
		// As a claim, without its second batch's write: BEGIN; upsert
		// workers; SELECT kinds FOR UPDATE; the pick; then COMMIT alone.
		storetest.CostClaimEmpty: {Statements: 5, RoundTrips: 2, Commits: 1},
		// One batch: BEGIN; one INSERT tasks of every task (unnest); COMMIT.
		storetest.CostInsertBatch: {Statements: 3, RoundTrips: 1, Commits: 1},
		// As a claim of one: the pick and the write are set-based.
		storetest.CostClaimBatch: {Statements: 6, RoundTrips: 2, Commits: 1},
		// Batch 1: BEGIN; SELECT schedules FOR UPDATE; SELECT open runs;
		// SELECT the last run. Batch 2: INSERT tasks (the run); UPDATE
		// schedules (state, version); COMMIT.
		storetest.CostFire: {Statements: 7, RoundTrips: 2, Commits: 1},
	})
}
