package mysqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rotahq/rota/internal/store"
	"github.com/rotahq/rota/internal/store/mysqlstore"
	"github.com/rotahq/rota/internal/store/mysqlstore/mysqltest"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestCostPerTask pins what each hot path asks of MySQL, so that a change
// cannot add a statement or a round trip unnoticed. The driver
// interpolates parameters, so each statement is one round trip, and so
// are START TRANSACTION and COMMIT; each COMMIT is one redo log flush
// (which InnoDB shares among concurrent commits).
func TestCostPerTask(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openOneConn(t, &c)
	tx := func(n int64) storecost.Counts { return storetest.Transaction(n, n) }
	got := storetest.WantHotPathCost(t, "MySQL", st, &c, rowWrites(t, st), map[string]storecost.Counts{
		// BEGIN; INSERT tasks; INSERT changes (the wake-up of other
		// nodes); COMMIT.
		storetest.CostInsert: tx(4),
		// BEGIN; SELECT workers FOR UPDATE (drain flag, kinds, last
		// sighting); upsert workers (its first sighting in this pass: it
		// is written only past a second, or when its address, kinds or
		// wait change); SELECT kinds FOR UPDATE; the pick (FOR UPDATE SKIP
		// LOCKED); UPDATE tasks (the run, in the task row); UPDATE kinds
		// (round_pos, rate tokens); COMMIT.
		storetest.CostClaim: tx(8),
		// BEGIN; SELECT tasks FOR UPDATE (by run id, with the worker's
		// drain flag and last sighting); UPDATE tasks (lease); COMMIT. The
		// worker was seen within the second: no UPDATE workers (5 before).
		storetest.CostHeartbeat: tx(4),
		// BEGIN; SELECT tasks FOR UPDATE (by run id); UPDATE tasks (the
		// run ended and the task settled, one write); COMMIT. The task
		// returned is built from the row read: a first attempt has no
		// history to read.
		storetest.CostComplete: tx(4),
		// As a claim without its writes of the task and the kind, nor of
		// the worker (seen within the second): 6 before.
		storetest.CostClaimEmpty: tx(5),
		// BEGIN; INSERT tasks (all 10 rows); INSERT changes; COMMIT.
		storetest.CostInsertBatch: tx(4),
		// As a claim, without the worker's write (seen within the second):
		// one UPDATE claims all 10 tasks (17 before: one per task).
		storetest.CostClaimBatch: tx(7),
		// BEGIN; SELECT schedules FOR UPDATE; SELECT open runs; INSERT
		// tasks (the run); UPDATE schedules (state, version); INSERT
		// changes; COMMIT.
		storetest.CostFire: tx(7),
		// BEGIN; UPDATE event_seq (LAST_INSERT_ID); INSERT events (one
		// statement); INSERT changes; COMMIT.
		storetest.CostEventAppend: tx(5),
	})
	// Rows written (the session's Handler_* counters: all tables
	// together; see RowWrites). A change row is the wake-up of the other
	// nodes: one per transaction that makes tasks claimable.
	storetest.WantRows(t, got, map[string]storecost.Rows{
		// The task and a change row.
		storetest.CostInsert: {Inserted: 2},
		// The worker's first sighting in this pass (an upsert that finds
		// its row: a write attempt and an update), the task (RUNNING, its
		// run in the row) and the kind (round_pos).
		storetest.CostClaim: {Inserted: 1, Updated: 3},
		// The task (the run's lease); the worker was seen within the
		// second.
		storetest.CostHeartbeat: {Updated: 1},
		// The task (run and task settled).
		storetest.CostComplete: {Updated: 1},
		// Nothing.
		storetest.CostClaimEmpty: {},
		// The tasks and one change row.
		storetest.CostInsertBatch: {Inserted: storetest.CostBatch + 1},
		// The tasks; once the kind.
		storetest.CostClaimBatch: {Updated: storetest.CostBatch + 1},
		// The run's task and a change row; the schedule (state, version).
		storetest.CostFire: {Inserted: 2, Updated: 1},
		// The events (one row each), a change row; the counter row.
		storetest.CostEventAppend: {Inserted: storetest.CostTaskEvents + 1, Updated: 1},
	})
}

// openOneConn opens a store of one connection (MaxConns 1) on a database
// of its own, so that RowWrites sees every row it writes.
func openOneConn(tb testing.TB, c *storecost.Counter) *mysqlstore.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := mysqlstore.New(ctx, mysqlstore.Config{URL: mysqltest.URL(), Database: mysqltest.NewDatabase(tb),
		NodeID: "n1", Cost: c, MaxConns: 1})
	if err != nil {
		tb.Fatalf("mysqlstore.New: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// rowWrites returns st's RowWrites as a function for storetest.
func rowWrites(tb testing.TB, st *mysqlstore.Store) func() map[string]storecost.Rows {
	return func() map[string]storecost.Rows {
		tb.Helper()
		w, err := mysqlstore.RowWrites(st, context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		return w
	}
}

// TestRowVersionsPerTask counts the rows a task writes on MySQL (the
// session's Handler_* counters of a store of one connection), alone and
// in groups, those of heartbeats and of a retry (one history row). Each
// row write is an InnoDB row version (an update keeps the previous one in
// the undo log).
func TestRowVersionsPerTask(t *testing.T) {
	t.Parallel()
	const n = 20
	st := openOneConn(t, nil)
	f := storetest.NewFixture(t, st)
	writes := rowWrites(t, st)
	delta := func(before map[string]storecost.Rows) storecost.Rows {
		return storecost.SubTables(writes(), before)["all"]
	}
	// Warm up: the kind's and the worker's rows exist.
	now := f.At(time.Second)
	f.CycleAlone("k", "w1", now, 1)

	// One by one: insert, claim and complete each task alone.
	before := writes()
	f.CycleAlone("k", "w1", now, n)
	single := delta(before)
	t.Logf("one by one, %d tasks: %+v", n, single)
	// The task inserted, claimed (RUNNING, the run in its row) and settled
	// (run and task in one write): 3 row versions; a change row at the
	// insert (the other nodes' wake-up); the kind's round position at the
	// claim. The worker's row is not written: it was seen within the
	// second. 5 per task.
	if want := (storecost.Rows{Inserted: 2 * n, Updated: 3 * n}); single != want {
		t.Errorf("row writes of %d tasks one by one: %+v, want %+v", n, single, want)
	}

	// In groups: one batch insert, one claim, a heartbeat each, one group
	// of reports.
	before = writes()
	runs := f.InsertClaimMany("k", "w1", now, n)
	mid := writes()
	for _, r := range runs {
		f.Heartbeat("w1", r.RunID, now)
	}
	if hb, want := delta(mid), (storecost.Rows{Updated: n}); hb != want {
		t.Errorf("%d heartbeats wrote %+v, want %+v (the task rows only)", n, hb, want)
	}
	reports := make([]store.RunCompleteParams, n)
	for i, r := range runs {
		reports[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now}
	}
	mid = writes()
	_, errs := mysqlstore.CompleteGroup(st, t.Context(), reports)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("report %d: %v", i, err)
		}
	}
	grouped := delta(before).Sub(storecost.Rows{Updated: n}) // without the heartbeats
	t.Logf("in groups of %d: %+v (the reports: %+v)", n, grouped, delta(mid))
	// The tasks ×3; one change row and one write of the kind per group.
	if want := (storecost.Rows{Inserted: n + 1, Updated: 2*n + 1}); grouped != want {
		t.Errorf("row writes of %d tasks in groups: %+v, want %+v", n, grouped, want)
	}

	// A retry: the failed first run goes to run_history when the second
	// claim replaces it in the task row.
	f.InsertNew("k", now)
	before = writes()
	f.Fail("w1", f.ClaimOne("w1", now, "k").RunID, now, func(int) time.Duration { return 0 })
	task := f.Succeed("w1", f.ClaimOne("w1", now, "k").RunID, now)
	if len(task.Runs) != 2 || task.Runs[0].Status != "FAILED" || task.Runs[1].Status != "SUCCESS" {
		t.Fatalf("retried task's runs: %+v", task.Runs)
	}
	// Two claims and two reports of the task, the kind twice; the history
	// row; a change row for the failure (the task is claimable again).
	if retry, want := delta(before), (storecost.Rows{Inserted: 2, Updated: 6}); retry != want {
		t.Errorf("row writes of a retried task: %+v, want %+v", retry, want)
	}
}

// TestCompleteGroupCost pins a group of plain reports (a first attempt of
// a task of one worker, no dependents) at one lock and one write for the
// whole group: BEGIN; SELECT tasks … WHERE run_id IN (…) FOR UPDATE;
// UPDATE tasks (a CASE on the id per column); COMMIT. Before: a
// savepoint, a lock and an update per report (1 + 3N + 1).
func TestCompleteGroupCost(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openOneConn(t, &c)
	f := storetest.NewFixture(t, st)
	const n = 10
	now := f.At(0)
	for range n {
		f.InsertNew("k", now)
	}
	runs := f.Claim("w1", now, n, "k").Runs
	if len(runs) != n {
		t.Fatalf("claimed %d, want %d", len(runs), n)
	}
	reports := make([]store.RunCompleteParams, n)
	for i, r := range runs {
		reports[i] = store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now}
	}
	before := c.Snapshot().Caller
	tasks, errs := mysqlstore.CompleteGroup(st, t.Context(), reports)
	got := c.Snapshot().Caller.Sub(before)
	for i, err := range errs {
		if err != nil || tasks[i] == nil || tasks[i].Status != "SUCCESS" || len(tasks[i].Runs) != 1 {
			t.Fatalf("report %d: task %+v, %v; want SUCCESS with its run", i, tasks[i], err)
		}
	}
	if want := storetest.Transaction(4, 4); got != want {
		t.Errorf("a group of %d reports: %v, want %v (32 before)", n, got, want)
	}
}
