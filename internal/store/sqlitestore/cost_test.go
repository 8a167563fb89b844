package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rotahq/rota/internal/store/sqlitestore"
	"github.com/rotahq/rota/internal/store/storecost"
	"github.com/rotahq/rota/internal/store/storetest"
)

// TestCostPerTask pins what each hot path asks of SQLite, so that a change
// cannot add a statement or a commit unnoticed. Each commit is one fsync of
// the WAL (synchronous=FULL). A write alone in its group commit pays BEGIN
// and COMMIT itself; ops that share a group commit share them (and each
// adds SAVEPOINT and RELEASE).
func TestCostPerTask(t *testing.T) {
	t.Parallel()
	var c storecost.Counter
	st, err := sqlitestore.New(context.Background(), sqlitestore.Config{Path: filepath.Join(t.TempDir(), "rota.db"), Cost: &c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// Measured on the store as of issue 13's "before". Each write is one
	// transaction of its own here (nothing else queued): BEGIN IMMEDIATE
	// and COMMIT are two of its statements, and its COMMIT one fsync. SQLite
	// runs in the process: a round trip is a call into the engine.
	storetest.WantHotPathCost(t, "SQLite", st, &c, nil, map[string]storecost.Counts{
		// BEGIN; INSERT tasks; COMMIT.
		storetest.CostInsert: inProcess(3),
		// BEGIN; upsert workers (last_seen); SELECT kinds; the pick (SELECT
		// tasks); INSERT runs; UPDATE tasks (RUNNING); UPDATE kinds
		// (round_pos, rate tokens); COMMIT.
		storetest.CostClaim: inProcess(8),
		// BEGIN; SELECT runs; SELECT tasks (hb_timeout_s); UPDATE runs
		// (lease); UPDATE workers (last_seen) RETURNING stop_requested;
		// COMMIT.
		storetest.CostHeartbeat: inProcess(6),
		// BEGIN; SELECT runs; UPDATE runs (SUCCESS); SELECT tasks; UPDATE
		// tasks (settled); SELECT tasks and SELECT runs (the task returned);
		// SELECT task_deps (its dependents, as it ended); COMMIT.
		storetest.CostComplete: inProcess(9),
		// BEGIN; upsert workers; SELECT kinds; the pick; COMMIT: an empty
		// claim is a write (the worker's last_seen) and an fsync.
		storetest.CostClaimEmpty: inProcess(5),
		// BEGIN; one INSERT tasks per task (10); COMMIT.
		storetest.CostInsertBatch: inProcess(2 + storetest.CostBatch),
		// BEGIN; upsert workers; SELECT kinds; the pick; per task INSERT
		// runs and UPDATE tasks (2 × 10); UPDATE kinds; COMMIT.
		storetest.CostClaimBatch: inProcess(6 + 2*storetest.CostBatch),
		// BEGIN; SELECT schedules; SELECT open runs; INSERT tasks (the
		// run); UPDATE schedules (state, version); COMMIT.
		storetest.CostFire: inProcess(6),
		// BEGIN; UPDATE event_seq RETURNING last_id; one INSERT events of
		// every event (json_each); COMMIT. In the server it rides in the
		// writer's group commit with other writes.
		storetest.CostEventAppend: inProcess(4),
	})
}

// inProcess is the cost of one transaction of n statements on SQLite,
// which runs in the process: each statement is a call into the engine, a
// round trip of its own.
func inProcess(n int64) storecost.Counts { return storetest.Transaction(n, n) }
