package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/store"

	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// openCounted opens a store in a fresh directory whose statements c
// counts, closed when t ends.
func openCounted(t *testing.T, c *storecost.Counter) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Cost: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestCostPerTask pins what each hot path asks of SQLite, so that a change
// cannot add a statement or a commit unnoticed. Each commit is one fsync of
// the WAL (synchronous=FULL). A write alone in its group commit pays BEGIN
// and COMMIT itself; ops that share a group commit share them
// (TestCostGroupCommit).
func TestCostPerTask(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st := openCounted(t, &c)
	// The lean store (issue 13). Each write is one transaction of its own
	// here (nothing else queued): BEGIN IMMEDIATE and COMMIT are two of its
	// statements, and its COMMIT one fsync. SQLite runs in the process: a
	// round trip is a call into the engine. Before issue 13: claim 8,
	// heartbeat 6, complete 9, insert batch 12 (2 + 1 per task), claim
	// batch 26 (6 + 2 per task).
	storetest.WantHotPathCost(t, "SQLite", st, &c, nil, map[string]storecost.Counts{
		// BEGIN; INSERT tasks; COMMIT.
		storetest.CostInsert: inProcess(3),
		// BEGIN; upsert workers (last_seen); SELECT kinds; the pick (SELECT
		// tasks); UPDATE tasks (RUNNING, the run in the row); UPDATE kinds
		// (round_pos, rate tokens); COMMIT.
		storetest.CostClaim: inProcess(7),
		// BEGIN; SELECT tasks (by run_id: the task and its run); UPDATE
		// tasks (lease); UPDATE workers (last_seen) RETURNING
		// stop_requested; COMMIT.
		storetest.CostHeartbeat: inProcess(5),
		// BEGIN; UPDATE tasks (run and task settled, found by run_id)
		// RETURNING the row; COMMIT. The task returned is that row: no run
		// history or dependents to read for a first attempt without any.
		storetest.CostComplete: inProcess(3),
		// BEGIN; upsert workers; SELECT kinds; the pick; COMMIT: an empty
		// claim is a write (the worker's last_seen) and an fsync.
		storetest.CostClaimEmpty: inProcess(5),
		// BEGIN; one INSERT tasks of all (multi-row); COMMIT.
		storetest.CostInsertBatch: inProcess(3),
		// BEGIN; upsert workers; SELECT kinds; the pick; one UPDATE tasks
		// of all (the runs in their rows); UPDATE kinds; COMMIT.
		storetest.CostClaimBatch: inProcess(7),
		// BEGIN; SELECT schedules; SELECT open runs; INSERT tasks (the
		// run); UPDATE schedules (state, version); COMMIT.
		storetest.CostFire: inProcess(6),
		// BEGIN; UPDATE event_seq RETURNING last_id; one multi-row INSERT
		// events of every event (bound rows); COMMIT. In the server it rides in the
		// writer's group commit with other writes.
		storetest.CostEventAppend: inProcess(4),
	})
}

// TestCostGroupCommit pins what a task costs when, as under load, the
// writes of many tasks arrive together: submits, then one claim of all,
// then their reports, each wave queued while the writer is busy. Each
// wave is one transaction, one fsync; a task costs its statements alone
// (no SAVEPOINT or RELEASE: operations validate before they write).
func TestCostGroupCommit(t *testing.T) {
	t.Parallel()
	const n = 50
	var c storecost.Counter
	st := openCounted(t, &c)
	f := storetest.NewFixture(t, st)
	now := f.At(0)
	// Warm up: the kind is known to exist, the statements are prepared.
	f.InsertNew("k", now)
	f.InsertNew("k", now)
	for _, r := range f.Claim("w1", now, 2, "k").Runs {
		f.Succeed("w1", r.RunID, now)
		if _, err := st.RunComplete(f.Ctx(), store.RunCompleteParams{RunID: r.RunID, WorkerID: "w1", Success: true, Now: now}); !errors.Is(err, rota.ErrLeaseLost) {
			t.Fatalf("second report: %v; want lease lost", err)
		}
	}

	before := c.Snapshot()
	together(t, st, n+1, func(int) error {
		_, err := st.TaskInsert(f.Ctx(), f.Params("k", now))
		return err
	})
	runs := f.Claim("w1", now, n+1, "k").Runs
	if len(runs) != n+1 {
		t.Fatalf("claimed %d runs; want %d", len(runs), n+1)
	}
	// One of the reports is refused (not its worker): it must not fail
	// the others, nor cost them a savepoint.
	together(t, st, n+1, func(i int) error {
		p := store.RunCompleteParams{RunID: runs[i].RunID, WorkerID: "w1", Success: true, Now: now}
		if i == n {
			p.WorkerID = "w2"
		}
		_, err := st.RunComplete(f.Ctx(), p)
		if i == n {
			if !errors.Is(err, rota.ErrLeaseLost) {
				return fmt.Errorf("report by another worker: %v; want lease lost", err)
			}
			return nil
		}
		return err
	})
	got := c.Snapshot().Sub(before).Total()
	// A wave queued behind the writer's hold costs the hold's BEGIN and
	// COMMIT and its own: the submits share multi-row INSERTs (up to 32
	// rows each: n before issue 13's store work); the claim (alone)
	// BEGIN, upsert workers, SELECT kinds, the pick, one UPDATE of all the
	// tasks, UPDATE kinds, COMMIT; the reports one SELECT of the rows they
	// settle and one UPDATE of them (completeFind, completeSettle: n
	// before issue 13's writer work), and the SELECT that explains the
	// refusal.
	want := storecost.Counts{
		Statements: 2 + 2 + (n+1+31)/32 + // submits
			7 + // claim
			2 + 2 + 2 + 1, // reports
		Commits: 2 + 1 + 2,
	}
	want.RoundTrips = want.Statements
	if got.Statements != want.Statements || got.Commits != want.Commits {
		t.Fatalf("%d tasks submitted, claimed and completed together cost %v; want %v", n+1, got, want)
	}
}

// together runs fn(0..n-1) concurrently, all queued while the writer is
// held in a transaction, so that they commit as one group.
func together(t *testing.T, st *sqlitestore.Store, n int, fn func(i int) error) {
	t.Helper()
	release := st.HoldWriterForTest()
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- fn(i) }()
	}
	for st.QueuedForTest() < n {
		time.Sleep(time.Millisecond)
	}
	release()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// inProcess is the cost of one transaction of n statements on SQLite,
// which runs in the process: each statement is a call into the engine, a
// round trip of its own.
func inProcess(n int64) storecost.Counts { return storetest.Transaction(n, n) }
