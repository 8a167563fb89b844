package pgstore_test

import (
	"context"
	"github.com/google/go-cmp/cmp"
	"github.com/rotahq/rota/internal/store"
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
	// Measured on the store as of issue 13's "before". A transaction is
	// pipelined (txn): BEGIN goes with the first batch and COMMIT with the
	// last, so a round trip is one batch; each COMMIT is one WAL flush.
	got := storetest.WantHotPathCost(t, "PostgreSQL", st, &c, func() map[string]storecost.Rows {
		w, err := st.RowWrites(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return w
	}, map[string]storecost.Counts{
		// One batch: BEGIN; INSERT tasks; COMMIT.
		storetest.CostInsert: storetest.Transaction(3, 1),
		// Batch 1: BEGIN; upsert workers; SELECT kinds FOR UPDATE; the pick
		// (candidatesSQL). Batch 2: one statement that inserts the runs
		// and updates the tasks (unnest); COMMIT.
		storetest.CostClaim: storetest.Transaction(6, 2),
		// Batch 1: BEGIN; SELECT tasks FOR NO KEY UPDATE; SELECT runs.
		// Batch 2: UPDATE runs (lease); UPDATE workers (last_seen)
		// RETURNING stop_requested; COMMIT.
		storetest.CostHeartbeat: storetest.Transaction(6, 2),
		// A report alone in its group. Batch 1: BEGIN; SELECT tasks FOR NO
		// KEY UPDATE; SELECT runs. Batch 2: UPDATE runs (SUCCESS); UPDATE
		// tasks (settled); SELECT tasks (the task returned); COMMIT.
		storetest.CostComplete: storetest.Transaction(7, 2),
		// As a claim, without its second batch's write: BEGIN; upsert
		// workers; SELECT kinds FOR UPDATE; the pick; then COMMIT alone.
		storetest.CostClaimEmpty: storetest.Transaction(5, 2),
		// One batch: BEGIN; one INSERT tasks of every task (unnest); COMMIT.
		storetest.CostInsertBatch: storetest.Transaction(3, 1),
		// As a claim of one: the pick and the write are set-based.
		storetest.CostClaimBatch: storetest.Transaction(6, 2),
		// Batch 1: BEGIN; SELECT schedules FOR UPDATE; SELECT open runs;
		// SELECT the last run. Batch 2: INSERT tasks (the run); UPDATE
		// schedules (state, version); COMMIT.
		storetest.CostFire: storetest.Transaction(7, 2),
		// One statement outside a transaction (its own commit, not counted
		// as a COMMIT): UPDATE event_seq joined with INSERT events SELECT
		// FROM unnest. The notification to the other nodes follows from the
		// notifier, merged with the kinds' ones.
		storetest.CostEventAppend: {Statements: 1, RoundTrips: 1, Commits: 0},
	})
	// Row versions (pg_stat_user_tables). Today, updates of tasks and of
	// runs' status are never HOT (indexed columns change); those of kinds,
	// workers, schedules and a run's lease usually are.
	storetest.WantRows(t, got, map[string]storecost.Rows{
		storetest.CostInsert: {Inserted: 1}, // the task
		// The run inserted; the task (RUNNING), the worker (last_seen)
		// and the kind (round_pos) updated.
		storetest.CostClaim: {Inserted: 1, Updated: 3},
		// The run (lease) and the worker (last_seen).
		storetest.CostHeartbeat: {Updated: 2},
		// The run (SUCCESS) and the task (SUCCEEDED).
		storetest.CostComplete: {Updated: 2},
		// The worker (last_seen).
		storetest.CostClaimEmpty:  {Updated: 1},
		storetest.CostInsertBatch: {Inserted: storetest.CostBatch},
		// Per task a run and the task's update; once the worker and kind.
		storetest.CostClaimBatch: {Inserted: storetest.CostBatch, Updated: storetest.CostBatch + 2},
		// The run's task inserted; the schedule (state, version) updated.
		storetest.CostFire: {Inserted: 1, Updated: 1},
		// The events inserted; the counter row updated (usually HOT).
		storetest.CostEventAppend: {Inserted: storetest.CostTaskEvents, Updated: 1},
	})
}

// TestRowVersionsPerTask counts the row versions a task writes on
// PostgreSQL (pg_stat_user_tables), alone and in groups, and the
// statements of a group of reports settled together: issue 13's "before".
func TestRowVersionsPerTask(t *testing.T) {
	t.Parallel()
	const n = 20
	var c storecost.Counter
	st := openCounted(t, &c)
	f := storetest.NewFixture(t, st)
	ctx := t.Context()
	writes := func() map[string]storecost.Rows {
		t.Helper()
		w, err := st.RowWrites(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	// Warm up: the kind's and the worker's rows exist.
	now := f.At(time.Second)
	f.InsertNew("k", now)
	f.Succeed("w1", f.ClaimOne("w1", now, "k").RunID, now)

	// One by one: insert, claim and complete each task alone.
	before := writes()
	for range n {
		f.InsertNew("k", now)
		f.Succeed("w1", f.ClaimOne("w1", now, "k").RunID, now)
	}
	single := storecost.SubTables(writes(), before)
	t.Logf("one by one, %d tasks: %+v", n, single)

	// In groups: one batch insert, one claim of n, one group of n reports.
	ps := make([]store.TaskInsertParams, n)
	for i := range ps {
		ps[i] = f.Params("k", now)
	}
	before = writes()
	if _, err := st.TaskInsertMany(ctx, ps); err != nil {
		t.Fatal(err)
	}
	runs := f.Claim("w1", now, n, "k").Runs
	if len(runs) != n {
		t.Fatalf("claimed %d, want %d", len(runs), n)
	}
	reports := make([]store.RunCompleteParams, n)
	for i, r := range runs {
		reports[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now}
	}
	cost := c.Snapshot()
	_, errs, err := pgstore.CompleteGroup(st, ctx, reports)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	groupCost := c.Snapshot().Sub(cost).Caller
	grouped := storecost.SubTables(writes(), before)
	t.Logf("in groups of %d: %+v; the group of reports: %v", n, grouped, groupCost)

	want := map[string]storecost.Rows{
		// Insert; claim (RUNNING); completion (SUCCEEDED).
		"tasks": {Inserted: n, Updated: 2 * n},
		// Insert at claim; completion.
		"runs": {Inserted: n, Updated: n},
		// The claim's upsert of the worker's row (last_seen).
		"workers": {Updated: n},
		// The claim's advance of the kind's weighted round (round_pos).
		"kinds": {Updated: n},
	}
	if d := cmp.Diff(want, withoutHot(single)); d != "" {
		t.Errorf("row writes of %d tasks one by one (-want +got):\n%s", n, d)
	}
	want["workers"] = storecost.Rows{Updated: 1} // one claim for the group
	want["kinds"] = storecost.Rows{Updated: 1}
	if d := cmp.Diff(want, withoutHot(grouped)); d != "" {
		t.Errorf("row writes of %d tasks in groups (-want +got):\n%s", n, d)
	}
	// A group of reports, whatever its size. Batch 1: BEGIN; lock the
	// tasks (SELECT FOR NO KEY UPDATE); SELECT their runs. Batch 2: UPDATE
	// of every ended run; UPDATE of every settled task; SELECT of the tasks
	// with their runs (the answers); COMMIT.
	wantGroup := storecost.Counts{Statements: 7, RoundTrips: 2, Commits: 1}
	groupCost.Prepares = 0
	if groupCost != wantGroup {
		t.Errorf("a group of %d reports: %v, want %v", n, groupCost, wantGroup)
	}
}

// withoutHot clears the HOT counts (reported, not pinned: whether an
// update is HOT depends on the room left in its page).
func withoutHot(m map[string]storecost.Rows) map[string]storecost.Rows {
	out := make(map[string]storecost.Rows, len(m))
	for k, r := range m {
		r.HotUpdated = 0
		out[k] = r
	}
	return out
}
