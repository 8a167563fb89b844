package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rotahq/rota/internal/store"

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
	// Issue 13's lean store. A transaction is pipelined (txn): BEGIN goes
	// with the first batch and COMMIT with the last, so a round trip is
	// one batch; each COMMIT is one WAL flush.
	got := storetest.WantHotPathCost(t, "PostgreSQL", st, &c, func() map[string]storecost.Rows {
		w, err := st.RowWrites(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return w
	}, map[string]storecost.Counts{
		// One INSERT tasks outside a transaction block, a transaction of
		// its own (insertcopy.go); BEGIN; INSERT tasks; COMMIT before.
		storetest.CostInsert: storetest.Transaction(1, 1),
		// One batch (claimOne): BEGIN; one statement that upserts the
		// worker (written only past a second) and locks the kind (SELECT
		// kinds FOR UPDATE; two statements before session 8), each only
		// when a task is claimable or the worker's row must be written;
		// one that picks the tasks and starts their runs in the task rows
		// (and moves a retried task's previous run to run_log; claimOneSQL);
		// COMMIT. Before session 9 the pick and the start were two
		// statements in two batches.
		storetest.CostClaim: storetest.Transaction(4, 1),
		// Batch 1: BEGIN; SELECT tasks FOR NO KEY UPDATE (found by
		// tasks_run), with the run in its row. Batch 2: UPDATE tasks
		// (lease); the worker's sighting (written only past a second) and
		// stop flag; COMMIT.
		storetest.CostHeartbeat: storetest.Transaction(5, 2),
		// A report alone in its group: UPDATE tasks … RETURNING
		// (completeFastSQL: run and task settled together, the report's
		// checks in its WHERE clause, no lock step; the task returned
		// whole) outside a transaction block, a transaction of its own.
		// BEGIN, the UPDATE and COMMIT in one batch before; 4 statements
		// in 2 round trips before that (a SELECT FOR NO KEY UPDATE first).
		storetest.CostComplete: storetest.Transaction(1, 1),
		// As a claim: BEGIN; the worker's upsert and the kind's lock
		// (neither runs: nothing is claimable, the worker was seen within
		// the second, so the transaction locks nothing and its COMMIT
		// flushes no WAL: TestEmptyClaimTakesNoLock); the pick, which
		// picks nothing (the transaction has no id); COMMIT. Two round
		// trips before session 9 (COMMIT went alone).
		storetest.CostClaimEmpty: storetest.Transaction(4, 1),
		// One INSERT tasks of every task (unnest) outside a transaction
		// block (from copyMinRows tasks on, one COPY); BEGIN, the INSERT
		// and COMMIT before.
		storetest.CostInsertBatch: storetest.Transaction(1, 1),
		// As a claim of one: the pick and the write are set-based.
		storetest.CostClaimBatch: storetest.Transaction(4, 1),
		// Batch 1: BEGIN; SELECT schedules FOR UPDATE; SELECT open runs;
		// SELECT the last run. Batch 2: INSERT tasks (the run); UPDATE
		// schedules (state, version); COMMIT.
		storetest.CostFire: storetest.Transaction(7, 2),
		// One statement outside a transaction block, its own commit (not
		// counted: it does not wait for its WAL flush): UPDATE event_seq
		// joined with INSERT events (one chunk of all the events) and the
		// pg_notify to the other nodes, when it knows of any.
		storetest.CostEventAppend: {Statements: 1, RoundTrips: 1, Commits: 0},
	})
	// Row versions (pg_stat_user_tables). Before issue 13 a task wrote a
	// run row at its claim and updated it at its end: claim 4, heartbeat
	// 2, complete 2.
	storetest.WantRows(t, got, map[string]storecost.Rows{
		storetest.CostInsert: {Inserted: 1}, // the task
		// The task (RUNNING, its run in the row), the kind (round_pos,
		// HOT) and the worker (its first sighting in this pass, HOT).
		storetest.CostClaim: {Updated: 3},
		// The task (the run's lease: HOT); the worker was seen within the
		// second.
		storetest.CostHeartbeat: {Updated: 1},
		// The task (run and task settled).
		storetest.CostComplete: {Updated: 1},
		// Nothing: the worker was seen within the second.
		storetest.CostClaimEmpty:  {},
		storetest.CostInsertBatch: {Inserted: storetest.CostBatch},
		// The tasks; once the kind.
		storetest.CostClaimBatch: {Updated: storetest.CostBatch + 1},
		// The run's task inserted; the schedule (state, version) updated.
		storetest.CostFire: {Inserted: 1, Updated: 1},
		// One chunk of the events inserted (one row per event before);
		// the counter row updated (usually HOT).
		storetest.CostEventAppend: {Inserted: 1, Updated: 1},
	})
}

// TestRowVersionsPerTask counts the row versions a task writes on
// PostgreSQL (pg_stat_user_tables), alone and in groups, those of
// heartbeats (HOT) and of a retry (one history row), and the statements
// of a group of reports settled together. Before issue 13 a task wrote 5
// row versions in two tables (task insert, run insert, task update at the
// claim, run and task updates at the end), plus a worker and a kind
// update per claim.
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
	f.CycleAlone("k", "w1", now, 1)

	// One by one: insert, claim and complete each task alone.
	before := writes()
	f.CycleAlone("k", "w1", now, n)
	single := storecost.SubTables(writes(), before)
	t.Logf("one by one, %d tasks: %+v", n, single)
	want := map[string]storecost.Rows{
		// Insert; claim (RUNNING, the run in the row); completion (run
		// and task settled): 3 row versions per task.
		"tasks": {Inserted: n, Updated: 2 * n},
		// The claim's advance of the kind's weighted round (round_pos).
		// The worker's row is not written: it was seen within the second.
		"kinds": {Updated: n},
	}
	if d := cmp.Diff(want, withoutHot(single)); d != "" {
		t.Errorf("row writes of %d tasks one by one (-want +got):\n%s", n, d)
	}

	grouped, groupCost := groupedTasks(t, st, &c, f, n, now, writes)
	want["kinds"] = storecost.Rows{Updated: 1} // one claim for the group
	if d := cmp.Diff(want, withoutHot(grouped)); d != "" {
		t.Errorf("row writes of %d tasks in groups (-want +got):\n%s", n, d)
	}
	// A group of success reports, whatever its size: one UPDATE … FROM
	// unnest … RETURNING of every task (completeFastSQL) outside a
	// transaction block. Before: BEGIN, it and COMMIT in one batch; 4
	// statements in 2 round trips before that (the tasks locked first by
	// a SELECT FOR NO KEY UPDATE).
	wantGroup := storecost.Counts{Statements: 1, RoundTrips: 1, Commits: 1}
	groupCost.Prepares = 0
	if groupCost != wantGroup {
		t.Errorf("a group of %d reports: %v, want %v", n, groupCost, wantGroup)
	}

	// A retry: the failed first run goes to the history (run_log) when
	// the second claim replaces it in the task row.
	f.InsertNew("k", now)
	before = writes()
	f.Fail("w1", f.ClaimOne("w1", now, "k").RunID, now, func(int) time.Duration { return 0 })
	task := f.Succeed("w1", f.ClaimOne("w1", now, "k").RunID, now)
	retry := storecost.SubTables(writes(), before)
	if len(task.Runs) != 2 || task.Runs[0].Status != "FAILED" || task.Runs[1].Status != "SUCCESS" {
		t.Fatalf("retried task's runs: %+v", task.Runs)
	}
	want = map[string]storecost.Rows{
		"tasks":   {Updated: 4}, // two claims, two reports
		"run_log": {Inserted: 1},
		"kinds":   {Updated: 2},
	}
	if d := cmp.Diff(want, withoutHot(retry)); d != "" {
		t.Errorf("row writes of a retried task (-want +got):\n%s", d)
	}
}

// groupedTasks inserts n tasks in one batch, claims them in one claim,
// heartbeats each and completes them in one group of reports, and returns
// the row writes of all but the heartbeats and the cost of the group of
// reports. It checks that the heartbeats updated the task rows only.
func groupedTasks(t *testing.T, st *pgstore.Store, c *storecost.Counter, f *storetest.Fixture, n int, now time.Time,
	writes func() map[string]storecost.Rows) (map[string]storecost.Rows, storecost.Counts) {
	t.Helper()
	ctx := t.Context()
	before := writes()
	runs := f.InsertClaimMany("k", "w1", now, n)
	mid := writes()
	for _, r := range runs {
		f.Heartbeat("w1", r.RunID, now)
	}
	hb := storecost.SubTables(writes(), mid)
	t.Logf("%d heartbeats: %+v", n, hb)
	if hb["tasks"].Updated != int64(n) || len(hb) != 1 {
		t.Errorf("%d heartbeats wrote %+v, want %d updates of tasks only", n, hb, n)
	}
	// HOT unless the page is full and cannot be pruned yet (other
	// transactions' snapshots keep its dead versions): reported, and
	// pinned on a page with room by TestHeartbeatIsHOT.
	reports := make([]store.RunCompleteParams, n)
	for i, r := range runs {
		reports[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now}
	}
	cost := c.Snapshot()
	answers, errs, err := pgstore.CompleteGroup(st, ctx, reports)
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	groupCost := c.Snapshot().Sub(cost).Caller
	grouped := storecost.SubTables(storecost.SubTables(writes(), before), hb)
	// The answers (made in memory) are the tasks as stored.
	for _, a := range answers {
		if d := cmp.Diff(f.Get(a.ID), a); d != "" {
			t.Fatalf("answer to a report of task %s differs from the task read (-read +answer):\n%s", a.ID, d)
		}
	}
	t.Logf("in groups of %d: %+v; the group of reports: %v", n, grouped, groupCost)
	return grouped, groupCost
}

// TestHeartbeatIsHOT checks that a heartbeat is a HOT update of the task
// row (no index covers the run's lease or message) when its page has
// room: a task alone in a new table, claimed, then heartbeated 5 times.
func TestHeartbeatIsHOT(t *testing.T) {
	t.Parallel()
	st := openCounted(t, nil)
	f := storetest.NewFixture(t, st)
	now := f.At(time.Second)
	f.InsertNew("k", now)
	run := f.ClaimOne("w1", now, "k")
	before, err := st.RowWrites(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		f.Heartbeat("w1", run.RunID, now)
	}
	after, err := st.RowWrites(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := storecost.SubTables(after, before)
	want := map[string]storecost.Rows{"tasks": {Updated: 5, HotUpdated: 5}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("row writes of 5 heartbeats (-want +got):\n%s", d)
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
